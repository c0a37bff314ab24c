// h2d_bound: a training loop that waits on host-to-device copies.
//
// Each sample is a large raw record (a full-resolution image, say) of which a
// small MLP reads a 64-value crop; the whole batch is still copied to the device
// every step, from ordinary (pageable) host memory, as a loop that crops on the
// device does. The copy, not the model, sets the pace:
//
//   build/bin/traceml run -- build/bin/examples/h2d_bound --device cuda
//
// Expect H2D-BOUND (critical) on the GPU clock, with the pageable copies as
// evidence. --pinned pins the host batches and copies them non_blocking, the
// usual fix; compare the two runs with `traceml compare`.
//
// --mark-h2d 1 (the default) wraps the copy in PhaseScope(Phase::H2D). With
// --mark-h2d 0 the copy is not marked: on a GPU, traceml's automatic H2D
// capture (CUPTI activity records) still sees it, without a call from the user.
//
// On --device cpu there is no device memory to copy to, so the "copy" is a
// real host copy of the same bytes into a buffer allocated once (as a device
// copy lands in memory that LibTorch's caching allocator already holds), timed
// the same way. The CPU clock never turns H2D into a verdict (its H2D times are
// only launches on a GPU machine), so there expect NO CLEAR BOTTLENECK with H2D
// as by far the largest phase; with --mark-h2d 0 the copy is residual time:
// RESIDUAL-HEAVY.
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <traceml/torch.hpp>

#include "device.hpp"
#include "flags.hpp"

namespace {

constexpr std::int64_t kCrop = 64;  // values of each record that the model reads
constexpr std::int64_t kHidden = 128;
constexpr std::int64_t kClasses = 10;
// Distinct host batches cycled through: together larger than any CPU cache, so
// each copy reads its source from memory, as a real input stream does.
constexpr std::int64_t kHostBatches = 4;

struct Settings {
  std::int64_t steps = 200;
  std::int64_t batch_size = 64;
  std::int64_t batch_mb = 32;
  bool pinned = false;
  std::int64_t mark_h2d = 1;
  double lr = 0.05;
  std::int64_t seed = 0;
  std::int64_t threads = 1;
  std::int64_t log_every = 50;
  std::string device = "cpu";
};

/// One batch in host memory: `records` [batch, values] float32, `target` [batch].
struct HostBatch {
  torch::Tensor records;
  torch::Tensor target;
};

/// Random records labelled by a fixed random linear "teacher" of their crop,
/// so there is something to learn and the loss goes down.
std::vector<HostBatch> make_host_batches(const Settings& settings) {
  const std::int64_t bytes = settings.batch_mb * 1024 * 1024;
  const std::int64_t values =
      std::max<std::int64_t>(kCrop, bytes / (settings.batch_size * std::int64_t{sizeof(float)}));
  const torch::Tensor teacher = torch::randn({kCrop, kClasses});
  std::vector<HostBatch> batches;
  for (std::int64_t i = 0; i < kHostBatches; ++i) {
    HostBatch batch;
    batch.records = torch::randn({settings.batch_size, values});
    batch.target = batch.records.narrow(1, 0, kCrop).matmul(teacher).argmax(1);
    if (settings.pinned) {
      batch.records = batch.records.pin_memory();
      batch.target = batch.target.pin_memory();
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

/// Where each batch goes: to the device, or, on the CPU, into a host buffer
/// allocated once, standing in for the transfer that a GPU run makes. A fresh
/// host tensor per step would time the C library's allocator instead: batches
/// of 32 MiB and more are mapped and page-faulted anew on every step, and
/// unmapped at the end of the step, outside every phase.
class Transfer {
 public:
  Transfer(const torch::Device& device, bool non_blocking)
      : device_(device), non_blocking_(non_blocking) {}

  HostBatch operator()(const HostBatch& batch) {
    if (!device_.is_cpu()) {
      return {batch.records.to(device_, non_blocking_), batch.target.to(device_, non_blocking_)};
    }
    if (!landing_.records.defined()) {
      landing_ = {torch::empty_like(batch.records), torch::empty_like(batch.target)};
    }
    landing_.records.copy_(batch.records);
    landing_.target.copy_(batch.target);
    return landing_;
  }

 private:
  torch::Device device_;
  bool non_blocking_;
  HostBatch landing_;
};

int train(const Settings& settings, const torch::Device& device) {
  const std::vector<HostBatch> batches = make_host_batches(settings);
  torch::nn::Sequential model(torch::nn::Linear(kCrop, kHidden), torch::nn::ReLU(),
                              torch::nn::Linear(kHidden, kClasses));
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(settings.lr).momentum(0.9));

  Transfer transfer(device, settings.pinned);

  traceml::init();
  // traceml::use_device(device) by its former name, which programs written
  // before it keep calling: the same call.
  traceml::enable_torch_cuda(device);

  std::int64_t step = 0;
  while (step < settings.steps) {  // one pass over the host batches per epoch
    for (const HostBatch& batch : traceml::wrap_dataloader(batches)) {
      torch::Tensor loss;
      {
        traceml::StepScope traced_step;
        HostBatch on_device;
        if (settings.mark_h2d != 0) {
          traceml::PhaseScope phase(traceml::Phase::H2D);
          on_device = transfer(batch);
        } else {  // unmarked: only the GPU clock's automatic H2D capture sees it
          on_device = transfer(batch);
        }
        {
          traceml::PhaseScope phase(traceml::Phase::Forward);
          const torch::Tensor crop = on_device.records.narrow(1, 0, kCrop);
          loss = torch::nn::functional::cross_entropy(model->forward(crop), on_device.target);
        }
        {
          traceml::PhaseScope phase(traceml::Phase::Backward);
          loss.backward();
        }
        {
          traceml::PhaseScope phase(traceml::Phase::OptimizerStep);
          optimizer.step();
          optimizer.zero_grad();
        }
      }
      ++step;
      if (step % settings.log_every == 0) {
        std::printf("step %lld loss %.4f\n", static_cast<long long>(step), loss.item<double>());
        std::fflush(stdout);
      }
      if (step == settings.steps) break;
    }
  }

  traceml::shutdown();
  std::printf("done\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  examples::Flags flags("h2d_bound",
                        "Trains a small MLP on a crop of large records, copying every batch "
                        "whole to the device, traced.");
  flags.add("steps", &settings.steps, "training steps");
  flags.add("batch-size", &settings.batch_size, "records per batch");
  flags.add("batch-mb", &settings.batch_mb, "MiB of host memory copied per batch");
  flags.add("pinned", &settings.pinned,
            "pin the host batches and copy them non_blocking (needs --device cuda)");
  flags.add("mark-h2d", &settings.mark_h2d,
            "1: time the copy as the H2D phase; 0: leave it unmarked");
  flags.add("lr", &settings.lr, "SGD learning rate");
  flags.add("seed", &settings.seed, "random seed (same seed, same output)");
  flags.add("threads", &settings.threads, "intra-op threads of LibTorch");
  flags.add("log-every", &settings.log_every, "print the loss every N steps");
  flags.add("device", &settings.device, "cpu or cuda[:N]");
  flags.parse(argc, argv);
  if (settings.steps < 0 || settings.batch_size < 1 || settings.batch_mb < 1 ||
      settings.threads < 1 || settings.log_every < 1) {
    flags.fail("--steps must be >= 0; --batch-size, --batch-mb, --threads, --log-every >= 1");
  }
  if (settings.mark_h2d != 0 && settings.mark_h2d != 1) flags.fail("--mark-h2d takes 0 or 1");
  const torch::Device device = examples::parse_device(flags, settings.device);
  if (settings.pinned && !device.is_cuda()) {
    flags.fail("--pinned needs --device cuda: pinned memory only helps copies to a GPU");
  }

  try {
    torch::set_num_threads(static_cast<int>(settings.threads));
    torch::manual_seed(static_cast<std::uint64_t>(settings.seed));
    return train(settings, device);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "h2d_bound: error: %s\n", error.what());
    return 1;
  }
}
