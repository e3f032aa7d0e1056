// Translates the environment of the engines users already run — torchrun,
// Slurm's srun, Open MPI's mpirun — into the coordinates a process needs to
// join a Strata world. This (and the launcher) is the only code that reads
// environment variables; libraries take `RendezvousInfo` or options structs.
#ifndef STRATA_COMM_ENVIRONMENT_H_
#define STRATA_COMM_ENVIRONMENT_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::comm {

// Where this process sits in the world and how to reach the rendezvous store.
struct RendezvousInfo {
  // Which engine's variables were used: "torchrun", "slurm", "openmpi", or
  // "single-process" when none is set.
  std::string source = "single-process";
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // This node's index in the job: torchrun's GROUP_RANK (the launcher sets it
  // too), Slurm's SLURM_NODEID; -1 when the variables do not say (Open MPI).
  int node_rank = -1;
  // Host of the c10d TCPStore, served by rank 0.
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // torchrun's agent already serves the store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank, 0 included, connects as
  // a client. Otherwise rank 0 serves it.
  bool store_served_externally = false;
  // Network interface for Gloo's transport (GLOO_SOCKET_IFNAME); empty means
  // "the address this host resolves to" (or loopback for a local master).
  std::string gloo_interface;
  // The launcher's heartbeat pipe (launch --heartbeat_timeout_s): the write
  // end a rank beats on (base/heartbeat.h) every heartbeat_interval_ms, from
  // STRATA_HEARTBEAT_FD and STRATA_HEARTBEAT_INTERVAL_MS; -1 and 0 when the
  // launcher watches no heartbeat.
  int heartbeat_fd = -1;
  int heartbeat_interval_ms = 0;
  // The restart round of this process's job (torchrun's and the launcher's
  // TORCHELASTIC_RESTART_COUNT): 0 for the first start, n after n restarts.
  int restart_count = 0;
};

// Looks up one environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The real process environment.
EnvLookup ProcessEnv();

// Reads the rendezvous coordinates. Precedence: torchrun's variables (RANK and
// WORLD_SIZE), then Slurm's (SLURM_PROCID), then Open MPI's
// (OMPI_COMM_WORLD_RANK); with none set, a single-process world.
//
// Missing, malformed or contradictory variables give InvalidArgument naming
// the variable, its value and what was expected.
absl::StatusOr<RendezvousInfo> RendezvousInfoFromEnv(const EnvLookup& env);

// The first host of a Slurm node list in its compressed form, e.g.
// "gpu[03-05,9],cpu1" -> "gpu03".
absl::StatusOr<std::string> FirstSlurmHost(absl::string_view nodelist);

}  // namespace strata::comm

#endif  // STRATA_COMM_ENVIRONMENT_H_
