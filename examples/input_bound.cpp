// input_bound: a training loop that waits on its input pipeline.
//
// The same MLP as quickstart, but every sample goes through a costly transform
// in the Dataset's get() (smoothing and standardising a raw signal, standing in
// for decoding and augmentation), with no loader workers. The loop spends most
// of each step waiting for the next batch, and traceml says so:
//
//   build/bin/examples/input_bound            # ./logs/input_bound_<timestamp>/
//   build/bin/traceml run -- build/bin/examples/input_bound
//
// Expect INPUT-BOUND (critical: input wait is well over 20% of the step).
// Lower --transform-us, or add loader workers in your own code, and compare.
//
//   build/bin/traceml run -- build/bin/examples/input_bound --transform-us 0
//       --steps 300 --stall-at-step 52 --stall-ms 6000     (one command line)
//
// One 6 s input stall (a storage hiccup) in steps of a few milliseconds: the
// mean step is input-bound, the typical step is not, and the report says so.
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include <traceml/torch.hpp>

#include "device.hpp"
#include "flags.hpp"

namespace {

constexpr std::int64_t kFeatures = 64;
constexpr std::int64_t kHidden = 128;
constexpr std::int64_t kClasses = 10;

// Raw signals labelled by a fixed random linear teacher; get() transforms
// each sample on the fly, as image or audio pipelines do.
class TransformedDataset : public torch::data::datasets::Dataset<TransformedDataset> {
 public:
  /// `stall_at_call` (>= 0): the get() call, counted from 0, that first
  /// waits `stall` (the first sample of one batch).
  TransformedDataset(std::int64_t samples, std::chrono::microseconds transform_cost,
                     std::int64_t stall_at_call, std::chrono::milliseconds stall)
      : raw_(torch::randn({samples, kFeatures})),
        targets_(raw_.matmul(torch::randn({kFeatures, kClasses})).argmax(1)),
        smoothing_(torch::full({1, 1, 5}, 0.2)),
        transform_cost_(transform_cost),
        stall_at_call_(stall_at_call),
        stall_(stall) {}

  torch::data::Example<> get(std::size_t index) override {
    const auto i = static_cast<std::int64_t>(index);
    if (calls_++ == stall_at_call_) std::this_thread::sleep_for(stall_);
    const auto start = std::chrono::steady_clock::now();
    torch::Tensor sample = transform(raw_[i]);
    // The transform is deterministic, so repeating it until the per-sample
    // budget is spent changes the cost, never the result: the same seed gives
    // the same loss whatever the machine's speed.
    while (std::chrono::steady_clock::now() - start < transform_cost_) {
      sample = transform(raw_[i]);
    }
    return {sample, targets_[i]};
  }
  examples::DatasetSize size() const override { return static_cast<std::size_t>(raw_.size(0)); }

 private:
  // A 5-tap moving average, then zero mean and unit variance.
  torch::Tensor transform(const torch::Tensor& raw) const {
    const torch::Tensor smoothed =
        torch::conv1d(raw.view({1, 1, kFeatures}), smoothing_, {}, 1, 2).view({kFeatures});
    return (smoothed - smoothed.mean()) / (smoothed.std() + 1e-5);
  }

  torch::Tensor raw_;
  torch::Tensor targets_;
  torch::Tensor smoothing_;
  std::chrono::microseconds transform_cost_;
  std::int64_t stall_at_call_;
  std::chrono::milliseconds stall_;
  std::int64_t calls_ = 0;
};

struct Settings {
  std::int64_t steps = 200;
  std::int64_t batch_size = 32;
  std::int64_t samples = 4096;
  std::int64_t transform_us = 100;
  std::int64_t hidden = kHidden;
  double lr = 0.05;
  std::int64_t seed = 0;
  std::int64_t threads = 1;
  std::int64_t log_every = 50;
  std::string device = "cpu";
  std::int64_t stall_at_step = 0;  // 0: no stall
  std::int64_t stall_ms = 0;
};

int train(const Settings& settings, const torch::Device& device) {
  auto dataset =
      TransformedDataset(
          settings.samples, std::chrono::microseconds(settings.transform_us),
          settings.stall_at_step > 0 ? (settings.stall_at_step - 1) * settings.batch_size : -1,
          std::chrono::milliseconds(settings.stall_ms))
          .map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(dataset), torch::data::DataLoaderOptions()
                              .batch_size(static_cast<std::size_t>(settings.batch_size))
                              .workers(0));

  const std::int64_t hidden = settings.hidden;
  torch::nn::Sequential model(torch::nn::Linear(kFeatures, hidden), torch::nn::ReLU(),
                              torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
                              torch::nn::Linear(hidden, kClasses));
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(settings.lr).momentum(0.9));

  traceml::init();
  traceml::use_device(device);  // the rank's device: on a GPU, its clock and memory

  std::int64_t step = 0;
  while (step < settings.steps) {  // one pass of the loader per epoch
    // Each batch's transforms run inside the loader's iteration, which
    // wrap_dataloader times as input wait.
    for (auto& batch : traceml::wrap_dataloader(*loader)) {
      torch::Tensor loss;
      {
        traceml::StepScope traced_step;
        auto on_device = traceml::to_device(batch, device);
        {
          traceml::PhaseScope phase(traceml::Phase::Forward);
          loss = torch::nn::functional::cross_entropy(model->forward(on_device.data),
                                                      on_device.target);
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
  examples::Flags flags("input_bound",
                        "Trains an MLP whose dataset transforms every sample on the fly, traced.");
  flags.add("steps", &settings.steps, "training steps");
  flags.add("batch-size", &settings.batch_size, "samples per batch");
  flags.add("samples", &settings.samples, "samples in the synthetic dataset");
  flags.add("transform-us", &settings.transform_us, "microseconds of transform work per sample");
  flags.add("hidden", &settings.hidden,
            "width of the MLP's two hidden layers (the compute beside the input)");
  flags.add("lr", &settings.lr, "SGD learning rate");
  flags.add("seed", &settings.seed, "random seed (same seed, same output)");
  flags.add("threads", &settings.threads, "intra-op threads of LibTorch");
  flags.add("log-every", &settings.log_every, "print the loss every N steps");
  flags.add("device", &settings.device, "cpu or cuda[:N]");
  flags.add("stall-at-step", &settings.stall_at_step,
            "one input stall: step N's batch waits --stall-ms first (0: none)");
  flags.add("stall-ms", &settings.stall_ms, "how long the --stall-at-step stall lasts");
  flags.parse(argc, argv);
  if (settings.steps < 0 || settings.batch_size < 1 || settings.samples < 1 ||
      settings.transform_us < 0 || settings.hidden < 1 || settings.threads < 1 ||
      settings.log_every < 1 || settings.stall_at_step < 0 || settings.stall_ms < 0) {
    flags.fail(
        "--steps, --transform-us, --stall-at-step, --stall-ms must be >= 0; --batch-size, "
        "--hidden, --samples, --threads, --log-every >= 1");
  }
  const torch::Device device = examples::parse_device(flags, settings.device);

  try {
    torch::set_num_threads(static_cast<int>(settings.threads));
    torch::manual_seed(static_cast<std::uint64_t>(settings.seed));
    return train(settings, device);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "input_bound: error: %s\n", error.what());
    return 1;
  }
}
