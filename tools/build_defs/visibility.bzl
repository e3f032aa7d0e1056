"""Who may depend on each package: the layers of docs/ARCHITECTURE.md.

Every BUILD file sets `package(default_visibility = <PACKAGE>_USERS)`: a
package's targets are visible to itself and to the layers above it only, so a
dependency that points up the layers fails to build, naming both targets.
A target private to its package says
`visibility = ["//visibility:private"]`.
"""

def _pkgs(*names):
    return ["//%s:__subpackages__" % n for n in names]

# The top: binaries and benchmarks. launch/'s self-launch helper and launcher
# are used by the benchmark binaries; launch/testing by every launch/ test.
LAUNCH_USERS = _pkgs("launch", "benchmarks")

# The subpackages of launch/, each with one job (launch/README.md); the
# arrows between them. The binaries (train, strata_plan, strata_generate) are
# public.
TRAIN_USERS = _pkgs("launch/train")
GENERATE_USERS = _pkgs("launch/generate")
PLAN_USERS = _pkgs("launch/plan", "launch/train")
DEEPSPEED_USERS = _pkgs("launch/deepspeed", "launch/train")
CONFIG_USERS = _pkgs("launch/config", "launch/deepspeed", "launch/plan",
                     "launch/generate", "launch/train")
OBSERVE_USERS = _pkgs("launch/observe", "launch/testing") + CONFIG_USERS

# checkpoint/strategy/ (the Strategy-level checkpoint API and strata_ckpt):
# the binaries and benchmarks.
CHECKPOINT_STRATEGY_USERS = _pkgs("checkpoint/strategy") + LAUNCH_USERS

# checkpoint/testing/ (strategies trained a few steps, for checkpoint tests).
CHECKPOINT_TESTING_USERS = _pkgs("checkpoint/strategy", "checkpoint/testing") + LAUNCH_USERS

# checkpoint/ (the formats): the Strategy-level API above them, the binaries.
CHECKPOINT_USERS = _pkgs("checkpoint") + LAUNCH_USERS

# strategies/: the Strategy-level checkpoint API and its test fixtures, the
# binaries. The checkpoint formats cannot see strategies.
STRATEGIES_USERS = _pkgs("strategies", "checkpoint/strategy",
                         "checkpoint/testing") + LAUNCH_USERS

# optim/ (flat parameters, optimizers, schedules).
OPTIM_USERS = _pkgs("optim") + STRATEGIES_USERS + CHECKPOINT_USERS

# comm/ (process groups, rendezvous, cross-rank exchanges).
COMM_USERS = _pkgs("comm") + OPTIM_USERS

# models/ and data/: used by the strategies (models through the unit
# protocol; data by the parity-test helpers), checkpoints and binaries.
MODELS_USERS = _pkgs("models", "strategies") + CHECKPOINT_USERS
DATA_USERS = _pkgs("data", "strategies") + CHECKPOINT_USERS

# text/ (tokenizers): the training data path, the binaries and benchmarks.
TEXT_USERS = _pkgs("text", "data") + DATA_USERS

# serialization/ (PyTorch pickle/zip files, safetensors): models' state dicts
# and Hugging Face layouts, the strategies, the checkpoint formats.
SERIALIZATION_USERS = _pkgs("serialization", "models", "data", "strategies") + CHECKPOINT_USERS

# base/: everyone.
BASE_USERS = ["//:__subpackages__"]
