// quickstart: the smallest traced LibTorch training loop.
//
// A multi-layer perceptron learns a synthetic classification task held in
// memory, read through a torch::data loader. traceml marks the loader (input
// wait), the step, and its H2D / forward / backward / optimizer phases. Run on
// its own it writes ./logs/quickstart_<timestamp>/final_summary.{json,txt};
// under `traceml run` the launcher writes the summary.
//
//   build/bin/examples/quickstart --steps 200
//   build/bin/traceml run -- build/bin/examples/quickstart
//
// Expect COMPUTE-BOUND (or BALANCED): input is in memory and cheap. On a GPU,
// give the model real work (--hidden 16384 --batch-size 256) so that the GPU,
// not the launches, sets the pace.
#include <torch/torch.h>

#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include <traceml/torch.hpp>

#include "device.hpp"
#include "flags.hpp"

namespace {

constexpr std::int64_t kFeatures = 64;
constexpr std::int64_t kClasses = 10;

// Inputs drawn from a normal distribution, labelled by a fixed random linear
// "teacher", so that there is something to learn and the loss goes down.
class SyntheticDataset : public torch::data::datasets::Dataset<SyntheticDataset> {
 public:
  explicit SyntheticDataset(std::int64_t samples)
      : inputs_(torch::randn({samples, kFeatures})),
        targets_(inputs_.matmul(torch::randn({kFeatures, kClasses})).argmax(1)) {}

  torch::data::Example<> get(std::size_t index) override {
    const auto i = static_cast<std::int64_t>(index);
    return {inputs_[i], targets_[i]};
  }
  examples::DatasetSize size() const override { return static_cast<std::size_t>(inputs_.size(0)); }

 private:
  torch::Tensor inputs_;
  torch::Tensor targets_;
};

struct Settings {
  std::int64_t steps = 200;
  std::int64_t batch_size = 32;
  std::int64_t hidden = 128;
  std::int64_t samples = 4096;
  double lr = 0.05;
  std::int64_t seed = 0;
  std::int64_t threads = 1;
  std::int64_t log_every = 50;
  std::string device = "cpu";
  std::string step_times;         // empty: not written
  std::string cpu_times;          // empty: not written
  bool no_gpu_clock = false;      // true: no traceml::use_device (CPU clock only)
  double after_training_s = 0.0;  // evaluation after the last step, outside any step
};

/// CPU time the calling thread has used, in microseconds.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

/// Writes one value a line; false when the file cannot be written.
bool write_lines(const std::string& path, const std::vector<double>& values) {
  std::ofstream out(path);
  for (const double value : values)
    out << value << '\n';
  if (out) return true;
  std::fprintf(stderr, "quickstart: error: cannot write %s\n", path.c_str());
  return false;
}

int train(const Settings& settings, const torch::Device& device) {
  auto dataset = SyntheticDataset(settings.samples).map(torch::data::transforms::Stack<>());
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
  if (!settings.no_gpu_clock) traceml::use_device(device);  // on a GPU, its clock and memory

  // --step-times: every step's wall time as the program itself sees it, from
  // the end of one iteration to the end of the next (the fetch included),
  // independent of traceml; bench/overhead.sh compares traced and untraced runs.
  // --cpu-times: the CPU time the training thread used in each step, likewise
  // (what tracing costs that thread, with the GPU clock's events included).
  const bool time_steps = !settings.step_times.empty();
  const bool time_cpu = !settings.cpu_times.empty();
  std::vector<double> step_ms;
  std::vector<double> cpu_us;
  if (time_steps) step_ms.reserve(static_cast<std::size_t>(settings.steps));
  if (time_cpu) cpu_us.reserve(static_cast<std::size_t>(settings.steps));
  auto iteration_end = std::chrono::steady_clock::now();
  double iteration_end_cpu = thread_cpu_us();

  std::int64_t step = 0;
  while (step < settings.steps) {  // one pass of the loader per epoch
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
      // As most programs print: no flush. Under `traceml run` in a terminal
      // each line still shows as it is printed (the rank's stdout is a
      // terminal too), and none is lost to a Ctrl-C.
      if (step % settings.log_every == 0)
        std::cout << "step " << step << " loss " << std::fixed << std::setprecision(4)
                  << loss.item<double>() << "\n";
      if (time_steps) {
        const auto now = std::chrono::steady_clock::now();
        step_ms.push_back(std::chrono::duration<double, std::milli>(now - iteration_end).count());
        iteration_end = now;
      }
      if (time_cpu) {
        const double now = thread_cpu_us();
        cpu_us.push_back(now - iteration_end_cpu);
        iteration_end_cpu = now;
      }
      if (step == settings.steps) break;
    }
  }

  // --after-training-s: what many programs do after their last step (an
  // evaluation pass), untraced: a rank between steps, which is no stall.
  if (settings.after_training_s > 0.0) {
    const torch::NoGradGuard no_grad;
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(settings.after_training_s);
    while (std::chrono::steady_clock::now() < until) {
      for (auto& batch : *loader) {
        model->forward(batch.data.to(device));
        if (std::chrono::steady_clock::now() >= until) break;
      }
    }
  }

  traceml::shutdown();
  if (time_steps && !write_lines(settings.step_times, step_ms)) return 1;
  if (time_cpu && !write_lines(settings.cpu_times, cpu_us)) return 1;
  std::cout << "done\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  examples::Flags flags("quickstart", "Trains an MLP on synthetic in-memory data, traced.");
  flags.add("steps", &settings.steps, "training steps");
  flags.add("batch-size", &settings.batch_size, "samples per batch");
  flags.add("hidden", &settings.hidden, "width of the MLP's two hidden layers");
  flags.add("samples", &settings.samples, "samples in the synthetic dataset");
  flags.add("lr", &settings.lr, "SGD learning rate");
  flags.add("seed", &settings.seed, "random seed (same seed, same output)");
  flags.add("threads", &settings.threads, "intra-op threads of LibTorch");
  flags.add("log-every", &settings.log_every, "print the loss every N steps");
  flags.add("device", &settings.device, "cpu or cuda[:N]");
  flags.add("step-times", &settings.step_times, "write each step's wall time (ms) to this file");
  flags.add("no-gpu-clock", &settings.no_gpu_clock,
            "do not hand traceml LibTorch's CUDA stream and allocator (the CPU clock only)");
  flags.add("cpu-times", &settings.cpu_times,
            "write each step's CPU time of the training thread (us) to this file");
  flags.add("after-training-s", &settings.after_training_s,
            "evaluate for this many seconds after the last step (untraced)");
  flags.parse(argc, argv);
  if (!(settings.after_training_s >= 0.0)) flags.fail("--after-training-s must be >= 0");
  if (settings.steps < 0 || settings.batch_size < 1 || settings.hidden < 1 ||
      settings.samples < 1 || settings.threads < 1 || settings.log_every < 1) {
    flags.fail(
        "--steps must be >= 0; --batch-size, --hidden, --samples, --threads, --log-every >= 1");
  }

  const torch::Device device = examples::parse_device(flags, settings.device);
  try {
    torch::set_num_threads(static_cast<int>(settings.threads));
    torch::manual_seed(static_cast<std::uint64_t>(settings.seed));
    return train(settings, device);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "quickstart: error: %s\n", error.what());
    return 1;
  }
}
