// PyTorch checkpoints through the train binary, in fresh processes: files
// written by a plain PyTorch script (python3 with torch, no Strata code)
// resume a run (--resume) and start one from weights (--load_weights), and
// wrong keys or shapes are errors naming the key and the flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::MetricsColumn;
using ::strata::launch::testing::ReadFile;
using ::strata::launch::testing::TempDir;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;

// A plain PyTorch script (torch only): reads a Strata full checkpoint and
// writes PyTorch files from it.
//   resume IN OUT:    {"state_dict", "optimizer": AdamW.state_dict() after
//                     load_state_dict, "meta": {"step"}} (no param_names,
//                     sampler or generator entries)
//   fresh IN OUT:     the weights, an AdamW that never stepped, step 0
//   weights IN OUT:   torch.save(model.state_dict()) (a bare OrderedDict)
//   renamed IN OUT:   the weights with wte.weight renamed wte.weightx
//   misshaped IN OUT: the weights with wpe.weight one row short
//   schedule IN OUT:  checks param_schedulers' named, typed fields (the kind
//                     and warm-up type by name, counts as ints, rates and
//                     ratios as floats; last_step one behind meta.step) and
//                     writes its field names
constexpr char kScript[] = R"PY(
import collections, sys, torch
cmd, src, dst = sys.argv[1:4]
ck = torch.load(src)
sd = collections.OrderedDict((k, v.clone()) for k, v in ck["state_dict"].items())
names = ck["optimizer"]["param_names"]
params = {n: sd[n].clone().requires_grad_() for n in names}
groups = [{"params": [params[names[i]] for i in g["params"]]}
          for g in ck["optimizer"]["param_groups"]]
if cmd == "resume":
    opt = torch.optim.AdamW(groups)
    opt.load_state_dict(ck["optimizer"])
    torch.save({"state_dict": sd, "optimizer": opt.state_dict(),
                "meta": {"step": ck["meta"]["step"]}}, dst)
elif cmd == "fresh":
    opt = torch.optim.AdamW(groups)
    torch.save({"state_dict": sd, "optimizer": opt.state_dict(),
                "meta": {"step": 0}}, dst)
elif cmd == "weights":
    torch.save(sd, dst)
elif cmd == "renamed":
    sd["wte.weightx"] = sd.pop("wte.weight")
    torch.save(sd, dst)
elif cmd == "misshaped":
    sd["wpe.weight"] = sd["wpe.weight"][:-1].clone()
    torch.save(sd, dst)
elif cmd == "schedule":
    (s,) = ck["param_schedulers"]
    assert s["kind"] == "cosine", s
    for k in ("warmup_steps", "total_steps", "step_size", "last_step"):
        assert type(s[k]) is int, (k, s)
    for k in ("base_lr", "min_lr", "gamma", "warmup_min_ratio", "min_ratio"):
        assert type(s[k]) is float, (k, s)
    assert s["warmup_type"] == "linear", s
    assert s["last_step"] == ck["meta"]["step"] - 1, s
    assert s["base_lr"] == 1e-3 and s["warmup_steps"] == 1, s
    open(dst, "w").write(",".join(sorted(s)))
else:
    raise SystemExit("unknown command " + cmd)
)PY";

void Python(const std::string& cmd, const std::string& src,
            const std::string& dst) {
  const std::string script = TempDir("torch_ckpt.py");
  std::ofstream(script) << kScript;
  RunResult r =
      ::strata::testing::Run({"/usr/bin/python3", script, cmd, src, dst},
                             {{"OMP_NUM_THREADS", "1"}}, absl::Seconds(120));
  ASSERT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
}

// gpt-tiny, `steps` steps, full checkpoints every 4 steps, one metrics line
// per step.
RunResult Train(const std::string& out, int steps,
                std::vector<std::string> more) {
  std::vector<std::string> args = {RunfilePath("launch/train/train"),
                                   absl::StrCat("--steps=", steps),
                                   "--warmup_steps=1",
                                   "--seq_len=32",
                                   "--markov_tokens=20000",
                                   "--global_batch=4",
                                   "--micro_batch=2",
                                   "--log_interval=1",
                                   "--eval_interval=0",
                                   "--lr=1e-3",
                                   "--min_lr=1e-4",
                                   "--save_every=4",
                                   "--ckpt_format=full",
                                   absl::StrCat("--output_dir=", out)};
  args.insert(args.end(), more.begin(), more.end());
  return ::strata::testing::Run(args, {}, absl::Seconds(180));
}

// Strata's run A (8 steps) saved step 4; the PyTorch script turns it into a
// PyTorch training checkpoint; resuming from that must continue exactly as
// A did (bitwise: the PyTorch file holds the same fp32 tensors, step 4.0 is
// exact, and the data position derived from meta.step x global batch is the
// one A saved), at 2 ranks under zero2 and, against Strata's own resume, in
// one process.
TEST(TorchCheckpointTest, ResumeFromPyTorchContinuesLikeStrataResume) {
  const std::string a = TempDir("a");
  const std::vector<std::string> two = {"--nproc=2", "--strategy=zero2"};
  RunResult first = Train(a, 8, two);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string step4 = a + "/checkpoints/step_00000004.pth";
  const std::string pytorch = TempDir("pytorch_resume.pth");
  Python("resume", step4, pytorch);

  const std::string b = TempDir("b");
  std::vector<std::string> resume = two;
  resume.push_back("--resume=" + pytorch);
  RunResult resumed = Train(b, 8, resume);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, HasSubstr("no data sampler state"));
  for (const std::string key : {"loss", "lr", "grad_norm"}) {
    const std::vector<double> want = MetricsColumn(a + "/metrics.jsonl", key);
    const std::vector<double> got = MetricsColumn(b + "/metrics.jsonl", key);
    ASSERT_EQ(want.size(), 8u) << key;
    ASSERT_EQ(got.size(), 4u) << key;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[4 + i]) << key << i;
  }
  EXPECT_EQ(ReadFile(b + "/model.pt"), ReadFile(a + "/model.pt"));

  // One process, "single": the PyTorch file and Strata's own file resume
  // identically.
  const std::string c = TempDir("c"), d = TempDir("d");
  RunResult from_pytorch = Train(c, 8, {"--resume=" + pytorch});
  ASSERT_EQ(from_pytorch.exit_code, 0) << from_pytorch.err;
  RunResult from_strata = Train(d, 8, {"--resume=" + step4});
  ASSERT_EQ(from_strata.exit_code, 0) << from_strata.err;
  for (const std::string key : {"loss", "lr", "grad_norm"}) {
    EXPECT_EQ(MetricsColumn(c + "/metrics.jsonl", key),
              MetricsColumn(d + "/metrics.jsonl", key))
        << key;
    EXPECT_EQ(MetricsColumn(c + "/metrics.jsonl", key).size(), 4u) << key;
  }
  EXPECT_EQ(ReadFile(c + "/model.pt"), ReadFile(d + "/model.pt"));
}

// --load_weights starts at step 0 with a fresh optimizer: a bare PyTorch
// state dict, Strata's full and sharded checkpoints of the same weights, and a
// PyTorch checkpoint of those weights with an AdamW that never stepped (resumed
// at meta.step 0), and Hugging Face safetensors of them (`strata_ckpt convert
// --to=hf-gpt2`, sharded, the model config from the checkpoint's meta) train
// identically, at 2 ranks under fsdp; the schedule
// restarts (the lr of the fresh run) and the losses are not the fresh
// run's (the weights were loaded).
TEST(TorchCheckpointTest, LoadWeightsStartsAtStepZeroFromTheWeights) {
  const std::string a = TempDir("w_a");
  RunResult fresh = Train(a, 4, {});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  const std::string step4 = a + "/checkpoints/step_00000004.pth";
  const std::string weights = TempDir("weights.pth");
  const std::string never_stepped = TempDir("never_stepped.pth");
  Python("weights", step4, weights);
  Python("fresh", step4, never_stepped);
  // The same run saving sharded checkpoints: the same weights at step 4.
  const std::string s = TempDir("w_sharded");
  RunResult sharded = Train(s, 4, {"--ckpt_format=sharded"});
  ASSERT_EQ(sharded.exit_code, 0) << sharded.err;
  const std::string sharded4 = s + "/checkpoints/step_00000004";
  const std::string hf = TempDir("w_hf_gpt2");
  RunResult exported = ::strata::testing::Run(
      {RunfilePath("checkpoint/strategy/strata_ckpt"), "convert",
       "--to=hf-gpt2", "--max_shard_bytes=200000", step4, hf},
      {}, absl::Seconds(60));
  ASSERT_EQ(exported.exit_code, 0) << exported.out << exported.err;

  const std::vector<std::string> two = {"--nproc=2", "--strategy=fsdp"};
  std::vector<std::vector<double>> losses;
  for (const std::string& flag :
       {"--load_weights=" + weights, "--load_weights=" + step4,
        "--resume=" + never_stepped, "--load_weights=" + sharded4,
        "--load_weights=" + hf}) {
    const std::string out = TempDir(absl::StrCat("w_", losses.size()));
    std::vector<std::string> args = two;
    args.push_back(flag);
    RunResult r = Train(out, 4, args);
    ASSERT_EQ(r.exit_code, 0) << flag << ": " << r.err;
    EXPECT_EQ(MetricsColumn(out + "/metrics.jsonl", "lr"),
              MetricsColumn(a + "/metrics.jsonl", "lr"))
        << flag;
    losses.push_back(MetricsColumn(out + "/metrics.jsonl", "loss"));
    ASSERT_EQ(losses.back().size(), 4u) << flag;
  }
  EXPECT_EQ(losses[1], losses[0]);
  EXPECT_EQ(losses[2], losses[0]);
  EXPECT_EQ(losses[3], losses[0]);
  EXPECT_EQ(losses[4], losses[0]);
  // Weights trained 4 steps on this data: a lower first loss than the
  // freshly initialised model's.
  EXPECT_LT(losses[0][0], MetricsColumn(a + "/metrics.jsonl", "loss")[0]);
}

// PyTorch reads the LR schedule as named fields with their own types, not
// numeric codes (the checks are in kScript's "schedule").
TEST(TorchCheckpointTest, ParamSchedulersAreNamedTypedFields) {
  const std::string out = TempDir("schedule_run");
  RunResult run = Train(out, 4, {});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string names = TempDir("schedule_fields.txt");
  Python("schedule", out + "/checkpoints/step_00000004.pth", names);
  EXPECT_EQ(ReadFile(names),
            "base_lr,gamma,kind,last_step,min_lr,min_ratio,step_size,"
            "total_steps,warmup_min_ratio,warmup_steps,warmup_type");
}

TEST(TorchCheckpointTest, WrongKeysAndShapesAreErrorsNamingThem) {
  const std::string a = TempDir("e_a");
  RunResult fresh = Train(a, 4, {});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  const std::string step4 = a + "/checkpoints/step_00000004.pth";
  const std::string renamed = TempDir("renamed.pth");
  const std::string misshaped = TempDir("misshaped.pth");
  Python("renamed", step4, renamed);
  Python("misshaped", step4, misshaped);

  RunResult r = Train(TempDir("e_1"), 4, {"--load_weights=" + renamed});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--load_weights=" + renamed));
  EXPECT_THAT(r.err, HasSubstr("wte.weightx"));
  EXPECT_THAT(r.err, HasSubstr("wte.weight"));

  r = Train(TempDir("e_2"), 4,
            {"--nproc=2", "--strategy=ddp", "--load_weights=" + misshaped});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--load_weights=" + misshaped));
  EXPECT_THAT(r.err, HasSubstr("wpe.weight"));

  // A bare state dict has no optimizer: not a training checkpoint.
  r = Train(TempDir("e_3"), 4, {"--resume=" + renamed});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--resume=" + renamed));

  r = Train(TempDir("e_4"), 4,
            {"--resume=" + step4, "--load_weights=" + step4});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("exclusive"));
}

}  // namespace
}  // namespace strata::launch
