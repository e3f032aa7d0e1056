// A rank program for launcher_test, driven by its arguments:
//
//   print_env                  prints the launcher's variables as KEY=VALUE
//   check_env KEY VALUE        exits 0 iff $KEY == VALUE, else 4
//   exit CODE                  exits with CODE
//   write_lines N              writes N long lines, each in several writes
//   partial_line               writes a line, then text with no newline
//   both_streams               writes one line to stdout and one to stderr
//   ready_then_sleep           prints "ready", then sleeps 60 s
//   pid_then_sleep             prints "pid=<its pid>", then sleeps 60 s
//   exit_on_rank R CODE [MODE] rank R exits with CODE, the others sleep 60 s;
//                              MODE "ignore_sigterm": the others ignore
//                              SIGTERM; "with_grandchild": the others fork a
//                              sleeping child and print its pid first
//   kill_on_rank R SIG         rank R kills itself with SIG, the others sleep

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <string>

namespace {

constexpr int kSleepS = 60;

int Rank() {
  const char* rank = getenv("RANK");
  return rank != nullptr ? atoi(rank) : -1;
}

void WriteString(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) exit(5);
    done += static_cast<size_t>(n);
  }
}

[[noreturn]] void SleepAndExit() {
  // sleep() returns early on a handled signal; ignored ones do not stop it.
  unsigned left = kSleepS;
  while (left > 0) left = sleep(left);
  exit(0);
}

int Usage() {
  fprintf(stderr, "launch_test_program: bad arguments\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string action = argv[1];
  if (action == "print_env") {
    for (const char* key :
         {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
          "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
          "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}) {
      const char* value = getenv(key);
      printf("%s=%s\n", key, value != nullptr ? value : "<unset>");
    }
    return 0;
  }
  if (action == "check_env" && argc == 4) {
    const char* value = getenv(argv[2]);
    if (value != nullptr && strcmp(value, argv[3]) == 0) return 0;
    fprintf(stderr, "%s is '%s', expected '%s'\n", argv[2],
            value != nullptr ? value : "<unset>", argv[3]);
    return 4;
  }
  if (action == "exit" && argc == 3) return atoi(argv[2]);
  if (action == "write_lines" && argc == 3) {
    const int num_lines = atoi(argv[2]);
    const std::string payload(300, 'x');
    for (int i = 0; i < num_lines; ++i) {
      // Three writes per line, so an unbuffered forwarder would interleave.
      WriteString(1, "rank " + std::to_string(Rank()) + " line ");
      sched_yield();
      WriteString(1, std::to_string(i) + " ");
      sched_yield();
      WriteString(1, payload + "\n");
    }
    return 0;
  }
  if (action == "partial_line") {
    WriteString(1, "complete line\nno newline at the end");
    return 0;
  }
  if (action == "both_streams") {
    WriteString(1, "to stdout\n");
    WriteString(2, "to stderr\n");
    return 0;
  }
  if (action == "pid_then_sleep") {
    WriteString(1, "pid=" + std::to_string(getpid()) + "\n");
    SleepAndExit();
  }
  if (action == "ready_then_sleep") {
    WriteString(1, "ready\n");
    SleepAndExit();
  }
  if (action == "exit_on_rank" && (argc == 4 || argc == 5)) {
    const std::string mode = argc == 5 ? argv[4] : "";
    if (Rank() == atoi(argv[2])) {
      // Gives the others time to set up what the mode asks for.
      if (!mode.empty()) usleep(500 * 1000);
      return atoi(argv[3]);
    }
    if (mode == "ignore_sigterm") {
      signal(SIGTERM, SIG_IGN);
    } else if (mode == "with_grandchild") {
      const pid_t child = fork();
      if (child == 0) SleepAndExit();
      WriteString(1, "grandchild pid " + std::to_string(child) + "\n");
    } else if (!mode.empty()) {
      return Usage();
    }
    SleepAndExit();
  }
  if (action == "kill_on_rank" && argc == 4) {
    if (Rank() == atoi(argv[2])) {
      kill(getpid(), atoi(argv[3]));
      pause();
    }
    SleepAndExit();
  }
  return Usage();
}
