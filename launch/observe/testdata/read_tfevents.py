"""An independent reader of TensorBoard event files, for tensorboard_python_test.

Usage: read_tfevents.py <event file> <output text file>

Written from the documented formats only (no TensorFlow, no protobuf
package): TFRecord framing (uint64 length LE, masked CRC-32C of the length,
data, masked CRC-32C of the data; mask(c) = ((c >> 15) | (c << 17)) +
0xa282ead8) and the protobuf wire format of tensorflow.Event (wall_time = 1
double, step = 2 int64, file_version = 3 string, summary = 5) and
tensorflow.Summary (value = 1; Value: tag = 1 string, simple_value = 2
float). Exits 1 naming the problem on a bad CRC, a truncated record or an
unexpected wire type. Writes one line per event:
  file_version <wall_time> <version>
  scalar <wall_time> <step> <tag> <value (%.9g)>
"""

import struct
import sys


def make_crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


CRC_TABLE = make_crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def fail(message):
    sys.stderr.write("read_tfevents: %s\n" % message)
    sys.exit(1)


def records(data):
    at = 0
    while at < len(data):
        if len(data) - at < 12:
            fail("truncated header at byte %d" % at)
        (length,) = struct.unpack_from("<Q", data, at)
        (length_crc,) = struct.unpack_from("<I", data, at + 8)
        if length_crc != masked(crc32c(data[at:at + 8])):
            fail("bad length CRC at byte %d" % at)
        if len(data) - at - 12 < length + 4:
            fail("truncated record at byte %d" % at)
        body = data[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        if data_crc != masked(crc32c(body)):
            fail("bad data CRC at byte %d" % at)
        yield body
        at += 16 + length


def varint(buf, at):
    value = 0
    shift = 0
    while True:
        if at >= len(buf):
            fail("truncated varint")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, at


def fields(buf):
    """Yields (field number, wire type, value) of a serialized message."""
    at = 0
    while at < len(buf):
        key, at = varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(buf, at)
        elif wire == 1:
            value = buf[at:at + 8]
            at += 8
        elif wire == 2:
            size, at = varint(buf, at)
            value = buf[at:at + size]
            at += size
        elif wire == 5:
            value = buf[at:at + 4]
            at += 4
        else:
            fail("unexpected wire type %d" % wire)
        if at > len(buf):
            fail("truncated field %d" % number)
        yield number, wire, value


def expect_wire(name, wire, expected):
    if wire != expected:
        fail("%s has wire type %d, expected %d" % (name, wire, expected))


def describe(event):
    wall_time, step, version, values = 0.0, 0, None, []
    for number, wire, value in fields(event):
        if number == 1:
            expect_wire("wall_time", wire, 1)
            (wall_time,) = struct.unpack("<d", value)
        elif number == 2:
            expect_wire("step", wire, 0)
            step = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 3:
            expect_wire("file_version", wire, 2)
            version = value.decode("utf-8")
        elif number == 5:
            expect_wire("summary", wire, 2)
            for vnumber, vwire, vvalue in fields(value):
                if vnumber != 1:
                    continue
                expect_wire("Summary.value", vwire, 2)
                tag, simple = None, None
                for f, w, v in fields(vvalue):
                    if f == 1:
                        expect_wire("tag", w, 2)
                        tag = v.decode("utf-8")
                    elif f == 2:
                        expect_wire("simple_value", w, 5)
                        (simple,) = struct.unpack("<f", v)
                if tag is None or simple is None:
                    fail("a Summary.Value without tag or simple_value")
                values.append((tag, simple))
    lines = []
    if version is not None:
        lines.append("file_version %.6f %s" % (wall_time, version))
    for tag, simple in values:
        lines.append("scalar %.6f %d %s %.9g" % (wall_time, step, tag, simple))
    return lines


def main():
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    out = []
    for record in records(data):
        out.extend(describe(record))
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
