// ddp: data-parallel training across ranks, with a rank that can be made slow.
//
// Each rank trains a replica of the same MLP on its shard of a synthetic
// dataset; after each backward pass the ranks average their gradients with an
// all-reduce over c10d's Gloo process group, as torch DDP does. The all-reduce
// is part of the Backward phase, so a rank that waits for a late peer shows it
// there: that is how traceml finds the straggler and what made it late.
//
// The ranks take their identity from the environment that `traceml run` (or
// torchrun) sets: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; under srun or
// mpirun, SLURM_PROCID/SLURM_NTASKS or OMPI_COMM_WORLD_RANK/_SIZE (or MPICH's
// PMI_RANK/PMI_SIZE) stand for RANK/WORLD_SIZE, and MASTER_ADDR/MASTER_PORT
// are passed by hand (docs/launchers.md).
//
//   build/bin/traceml run --nproc-per-node 2 -- build/bin/examples/ddp FLAGS
//
// with FLAGS (the verdict it gives):
//   --slow-rank 1 --slow-input-ms 20      INPUT STRAGGLER, rank 1
//   --slow-rank 1 --slow-forward-ms 20    COMPUTE STRAGGLER, rank 1
//   --slow-rank 1 --slow-residual-ms 20   STRAGGLER (unattributed), rank 1
//   --slow-rank 1 --crash-at-step 50      rank 1 exits with code 3 in step 50
//   --slow-rank 1 --slow-forward-ms 20 --slow-from-step 200 --slow-to-step 300
//                                         rank 1 slow only in steps 200 to 300 (what
//                                         `traceml run --profile auto` catches)
//   --slow-rank 1 --hang-at-step 50       rank 1 stops in step 50's forward pass and
//                                         never reaches the all-reduce: the others
//                                         wait in backward until --timeout-s (HANG)
//
// Without WORLD_SIZE it runs as one rank with no process group, unless
// --backend is given: then even one rank makes its process group, which is how
// a one-GPU machine runs NCCL (--device cuda --backend nccl).
//
// --backend nccl needs a LibTorch with CUDA and NCCL's nccl.h at build time,
// gloo needs Gloo's headers (examples/CMakeLists.txt defines
// TRACEML_EXAMPLE_NCCL and TRACEML_EXAMPLE_GLOO, and LibTorch's USE_C10D_NCCL
// and USE_C10D_GLOO, when they are there).
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if TRACEML_EXAMPLE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if TRACEML_EXAMPLE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <traceml/torch.hpp>

#include "device.hpp"
#include "flags.hpp"

namespace {

constexpr std::int64_t kFeatures = 64;
constexpr std::int64_t kHidden = 128;
constexpr std::int64_t kClasses = 10;

using Milliseconds = std::chrono::duration<double, std::milli>;

// Inputs labelled by a fixed random linear teacher. A batch can be made to
// arrive late (a slow disk or decoder on this rank's node): get_batch is what
// the loader calls for each batch.
class SyntheticDataset : public torch::data::datasets::Dataset<SyntheticDataset> {
 public:
  SyntheticDataset(std::int64_t samples, Milliseconds batch_delay)
      : inputs_(torch::randn({samples, kFeatures})),
        targets_(inputs_.matmul(torch::randn({kFeatures, kClasses})).argmax(1)),
        batch_delay_(batch_delay) {}

  torch::data::Example<> get(std::size_t index) override {
    const auto i = static_cast<std::int64_t>(index);
    return {inputs_[i], targets_[i]};
  }
  std::vector<torch::data::Example<>> get_batch(c10::ArrayRef<std::size_t> indices) override {
    if (batch_delay_.count() > 0) std::this_thread::sleep_for(batch_delay_);
    return Dataset::get_batch(indices);
  }
  examples::DatasetSize size() const override { return static_cast<std::size_t>(inputs_.size(0)); }

 private:
  torch::Tensor inputs_;
  torch::Tensor targets_;
  Milliseconds batch_delay_;
};

/// This process's place in the job, from the launcher's environment.
struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 29500;
};

/// The first of `names` that is set, as an integer (launchers name the same
/// thing differently: torchrun, Slurm, Open MPI, MPICH, in that order, as
/// traceml's runtime reads them).
std::optional<std::int64_t> env_int(const examples::Flags& flags,
                                    std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') continue;
    char* end = nullptr;
    const long long value = std::strtoll(text, &end, 10);
    if (*end != '\0')
      flags.fail(std::string("environment variable ") + name + "=" + text + " is not an integer");
    return static_cast<std::int64_t>(value);
  }
  return std::nullopt;
}

Rendezvous read_rendezvous(const examples::Flags& flags) {
  Rendezvous rendezvous;
  const std::int64_t world_size =
      env_int(flags, {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
          .value_or(1);
  const std::int64_t rank =
      env_int(flags, {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}).value_or(0);
  const std::int64_t port = env_int(flags, {"MASTER_PORT"}).value_or(29500);
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    flags.fail("RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world_size) +
               ": need 0 <= RANK < WORLD_SIZE");
  }
  if (port < 1 || port > 65535)
    flags.fail("MASTER_PORT=" + std::to_string(port) + " is not a port");
  rendezvous.world_size = static_cast<int>(world_size);
  rendezvous.rank = static_cast<int>(rank);
  rendezvous.master_port = static_cast<std::uint16_t>(port);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    rendezvous.master_addr = addr;
  }
  return rendezvous;
}

/// The process group's backend: none (one rank, no --backend), Gloo or NCCL.
enum class Backend { kNone, kGloo, kNccl };

/// Averages gradients (and aligns initial weights) across ranks over Gloo or
/// NCCL. With one rank and no --backend there is no process group and nothing
/// to do.
class GradientAverager {
 public:
  GradientAverager(const Rendezvous& rendezvous, Backend backend, std::chrono::milliseconds timeout)
      : world_size_(rendezvous.world_size) {
    if (backend == Backend::kNone) return;
    // Rank 0 hosts the store; the others connect to it, retrying until timeout,
    // so a rank whose peers never come (or died) fails instead of hanging.
    // Under torchrun the agent hosts it already on MASTER_PORT
    // (TORCHELASTIC_USE_AGENT_STORE=True): every rank is then a client and
    // keys go under the attempt's prefix, as torch.distributed does.
    const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    const bool agent_store = agent != nullptr && std::string(agent) == "True";
    c10d::TCPStoreOptions store_options;
    store_options.port = rendezvous.master_port;
    store_options.isServer = rendezvous.rank == 0 && !agent_store;
    store_options.numWorkers = static_cast<std::size_t>(rendezvous.world_size);
    store_options.timeout = timeout;
    c10::intrusive_ptr<c10d::Store> store =
        c10::make_intrusive<c10d::TCPStore>(rendezvous.master_addr, store_options);
    if (agent_store) {
      const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
      store = c10::make_intrusive<c10d::PrefixStore>(
          std::string("/worker/attempt_") + (attempt != nullptr ? attempt : "0"), store);
    }

#if TRACEML_EXAMPLE_NCCL
    if (backend == Backend::kNccl) {
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      nccl_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rendezvous.rank,
                                                          rendezvous.world_size, options);
      return;
    }
#endif
#if TRACEML_EXAMPLE_GLOO
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(gloo_device(rendezvous.master_addr));
    gloo_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rendezvous.rank,
                                                        rendezvous.world_size, options);
#endif
  }

  /// Copies rank 0's initial weights to every rank.
  void broadcast_parameters(const std::vector<torch::Tensor>& parameters) {
    if (!grouped()) return;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> flat{torch::nn::utils::parameters_to_vector(parameters)};
#if TRACEML_EXAMPLE_NCCL
    if (nccl_) nccl_->broadcast(flat)->wait();
#endif
#if TRACEML_EXAMPLE_GLOO
    if (gloo_) gloo_->broadcast(flat)->wait();
#endif
    torch::nn::utils::vector_to_parameters(flat[0], parameters);
  }

  /// Replaces each gradient by its mean over the ranks: one all-reduce of all
  /// gradients flattened into one buffer, as DDP's gradient buckets do.
  void average_gradients(const std::vector<torch::Tensor>& parameters) {
    if (!grouped()) return;
    std::vector<torch::Tensor> grads;
    grads.reserve(parameters.size());
    for (const auto& parameter : parameters)
      grads.push_back(parameter.grad().view({-1}));
    std::vector<torch::Tensor> flat{torch::cat(grads)};
#if TRACEML_EXAMPLE_NCCL
    if (nccl_) {
      // NCCL averages itself (ncclAvg). With one rank an in-place sum is no
      // work at all, while the average still runs NCCL's one-rank reduction
      // kernel, so a one-GPU machine shows a collective on the GPU clock.
      c10d::AllreduceOptions average;
      average.reduceOp = c10d::ReduceOp(c10d::ReduceOp::AVG);
      nccl_->allreduce(flat, average)->wait();
    }
#endif
#if TRACEML_EXAMPLE_GLOO
    if (gloo_) {
      gloo_->allreduce(flat)->wait();
      flat[0].div_(world_size_);
    }
#endif
    std::int64_t offset = 0;
    for (const auto& parameter : parameters) {
      const std::int64_t count = parameter.numel();
      parameter.grad().copy_(flat[0].slice(0, offset, offset + count).view_as(parameter));
      offset += count;
    }
  }

 private:
#if TRACEML_EXAMPLE_GLOO
  // Ranks of one machine (MASTER_ADDR on loopback) talk over loopback, which
  // needs no resolvable hostname; GLOO_SOCKET_IFNAME picks an interface as in
  // PyTorch; otherwise Gloo binds to the address of this host's name.
  static std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname) {
      return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
    }
    if (master_addr == "localhost" || master_addr.rfind("127.", 0) == 0) {
      return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    }
    return c10d::ProcessGroupGloo::createDefaultDevice();
  }
#endif

  bool grouped() const {
#if TRACEML_EXAMPLE_NCCL
    if (nccl_) return true;
#endif
#if TRACEML_EXAMPLE_GLOO
    if (gloo_) return true;
#endif
    return false;
  }

  int world_size_;
#if TRACEML_EXAMPLE_GLOO
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_;
#endif
#if TRACEML_EXAMPLE_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl_;
#endif
};

/// Keeps the CPU busy with tensor work for `duration` (extra compute on a slow
/// rank); the result is thrown away, so the training itself is unchanged.
void busy_for(Milliseconds duration) {
  torch::NoGradGuard no_grad;
  const auto start = std::chrono::steady_clock::now();
  torch::Tensor work = torch::full({64, 64}, 0.01);
  while (std::chrono::steady_clock::now() - start < duration) {
    work = torch::tanh(work.matmul(work));
  }
}

struct Settings {
  std::int64_t steps = 200;
  std::int64_t batch_size = 32;
  std::int64_t samples = 4096;
  double lr = 0.05;
  std::int64_t seed = 0;
  std::int64_t threads = 1;
  std::int64_t log_every = 50;
  std::string device = "cpu";
  std::int64_t timeout_s = 60;
  std::string backend;  // empty: gloo with several ranks, none with one
  std::optional<std::int64_t> slow_rank;
  double slow_input_ms = 0;
  double slow_forward_ms = 0;
  double slow_residual_ms = 0;
  std::optional<std::int64_t> crash_at_step;
  bool crash_abruptly = false;
  std::optional<std::int64_t> hang_at_step;
  /// The --slow-*-ms delays hit only steps slow_from to slow_to (1-based).
  std::int64_t slow_from = 1;
  std::int64_t slow_to = std::numeric_limits<std::int64_t>::max();
};

int train(const Settings& settings, const Rendezvous& rendezvous, Backend backend,
          const torch::Device& device) {
  const bool slow = settings.slow_rank == rendezvous.rank;
  // Step `n` (1-based) of the slow rank is inside --slow-from-step..--slow-to-step.
  const auto slow_now = [&](std::int64_t n) {
    return slow && n >= settings.slow_from && n <= settings.slow_to;
  };
  const bool leader = rendezvous.rank == 0;
  GradientAverager averager(rendezvous, backend, std::chrono::seconds(settings.timeout_s));

  auto dataset =
      SyntheticDataset(settings.samples, Milliseconds(slow ? settings.slow_input_ms : 0.0))
          .map(torch::data::transforms::Stack<>());
  const auto dataset_size = static_cast<std::size_t>(settings.samples);
  // Each rank reads its own shard; all shards have the same length, so every
  // rank runs the same number of steps.
  auto loader = torch::data::make_data_loader(
      std::move(dataset),
      torch::data::samplers::DistributedRandomSampler(
          dataset_size, static_cast<std::size_t>(rendezvous.world_size),
          static_cast<std::size_t>(rendezvous.rank)),
      torch::data::DataLoaderOptions()
          .batch_size(static_cast<std::size_t>(settings.batch_size))
          .workers(0));

  torch::nn::Sequential model(torch::nn::Linear(kFeatures, kHidden), torch::nn::ReLU(),
                              torch::nn::Linear(kHidden, kHidden), torch::nn::ReLU(),
                              torch::nn::Linear(kHidden, kClasses));
  model->to(device);
  const std::vector<torch::Tensor> parameters = model->parameters();
  averager.broadcast_parameters(parameters);
  torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(settings.lr).momentum(0.9));

  traceml::init();
  traceml::use_device(device);  // the rank's device: on a GPU, its clock and memory

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
          if (slow_now(step + 1) && settings.slow_forward_ms > 0)
            busy_for(Milliseconds(settings.slow_forward_ms));
          if (slow && settings.hang_at_step == step + 1) {
            std::fprintf(stderr, "ddp: rank %d: hanging in step %lld as asked\n", rendezvous.rank,
                         static_cast<long long>(step + 1));
            std::fflush(stderr);
            for (;;)  // never returns: the others wait for it in the all-reduce
              std::this_thread::sleep_for(std::chrono::seconds(1));
          }
        }
        if (slow && settings.crash_at_step == step + 1) {
          std::fprintf(stderr, "ddp: rank %d: crashing at step %lld as asked\n", rendezvous.rank,
                       static_cast<long long>(step + 1));
          std::fflush(stderr);
          if (settings.crash_abruptly) std::_Exit(3);
          std::exit(3);
        }
        {
          // The all-reduce waits for the slowest rank: that wait is backward time.
          traceml::PhaseScope phase(traceml::Phase::Backward);
          loss.backward();
          averager.average_gradients(parameters);
        }
        {
          traceml::PhaseScope phase(traceml::Phase::OptimizerStep);
          optimizer.step();
          optimizer.zero_grad();
        }
        // Work inside the step but outside every phase (logging, checkpointing).
        if (slow_now(step + 1) && settings.slow_residual_ms > 0) {
          std::this_thread::sleep_for(Milliseconds(settings.slow_residual_ms));
        }
      }
      ++step;
      if (leader && step % settings.log_every == 0) {
        std::printf("step %lld loss %.4f\n", static_cast<long long>(step), loss.item<double>());
        std::fflush(stdout);
      }
      if (step == settings.steps) break;
    }
  }

  traceml::shutdown();
  if (leader) std::printf("done\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  examples::Flags flags("ddp",
                        "Trains an MLP data-parallel over Gloo, one process per rank (RANK, "
                        "WORLD_SIZE,\nMASTER_ADDR, MASTER_PORT from the launcher), traced.");
  flags.add("steps", &settings.steps, "training steps");
  flags.add("batch-size", &settings.batch_size, "samples per batch and rank");
  flags.add("samples", &settings.samples, "samples in the synthetic dataset (all ranks)");
  flags.add("lr", &settings.lr, "SGD learning rate");
  flags.add("seed", &settings.seed, "random seed (same seed, same output)");
  flags.add("threads", &settings.threads, "intra-op threads of LibTorch");
  flags.add("log-every", &settings.log_every, "print rank 0's loss every N steps");
  flags.add("device", &settings.device, "cpu or cuda[:N]");
  flags.add("timeout-s", &settings.timeout_s, "give up on a missing or dead peer after this long");
  flags.add("backend", &settings.backend,
            "gloo or nccl (default: gloo with several ranks, no process group with one)");
  flags.add("slow-rank", &settings.slow_rank, "the rank that the --slow-* and --crash-* flags hit");
  flags.add("slow-input-ms", &settings.slow_input_ms, "extra delay of each batch's loading");
  flags.add("slow-forward-ms", &settings.slow_forward_ms, "extra compute in each forward pass");
  flags.add("slow-residual-ms", &settings.slow_residual_ms,
            "extra sleep in each step outside every phase");
  flags.add("slow-from-step", &settings.slow_from,
            "the first step (1-based) that --slow-forward-ms and --slow-residual-ms hit");
  flags.add("slow-to-step", &settings.slow_to,
            "the last step that --slow-forward-ms and --slow-residual-ms hit");
  flags.add("crash-at-step", &settings.crash_at_step,
            "exit with code 3 during this step (1-based)");
  flags.add("crash-abruptly", &settings.crash_abruptly,
            "with --crash-at-step: skip exit handlers, like a killed process");
  flags.add("hang-at-step", &settings.hang_at_step,
            "stop in this step's forward pass for good (1-based): a collective hang");
  flags.parse(argc, argv);
  if (settings.steps < 0 || settings.batch_size < 1 || settings.samples < 1 ||
      settings.threads < 1 || settings.log_every < 1 || settings.timeout_s < 1) {
    flags.fail(
        "--steps must be >= 0; --batch-size, --samples, --threads, --log-every, --timeout-s >= 1");
  }
  if (settings.slow_input_ms < 0 || settings.slow_forward_ms < 0 || settings.slow_residual_ms < 0) {
    flags.fail("--slow-*-ms must be >= 0");
  }
  if (settings.slow_from < 1 || settings.slow_to < settings.slow_from)
    flags.fail("--slow-from-step must be >= 1 and --slow-to-step >= --slow-from-step");
  const bool slow_asked = settings.slow_input_ms > 0 || settings.slow_forward_ms > 0 ||
                          settings.slow_residual_ms > 0 || settings.crash_at_step.has_value() ||
                          settings.hang_at_step.has_value();
  if (slow_asked && !settings.slow_rank)
    flags.fail("--slow-*-ms, --crash-at-step and --hang-at-step need --slow-rank");
  const Rendezvous rendezvous = read_rendezvous(flags);
  if (settings.slow_rank &&
      (*settings.slow_rank < 0 || *settings.slow_rank >= rendezvous.world_size)) {
    flags.fail("--slow-rank " + std::to_string(*settings.slow_rank) +
               " is not a rank (WORLD_SIZE=" + std::to_string(rendezvous.world_size) + ")");
  }
  const torch::Device device = examples::parse_device(flags, settings.device);
  Backend backend = rendezvous.world_size > 1 ? Backend::kGloo : Backend::kNone;
  if (settings.backend == "gloo") {
    backend = Backend::kGloo;
  } else if (settings.backend == "nccl") {
#if TRACEML_EXAMPLE_NCCL
    if (!device.is_cuda()) flags.fail("--backend nccl needs --device cuda");
    backend = Backend::kNccl;
#else
    flags.fail("--backend nccl: this build has no NCCL (a LibTorch with CUDA and nccl.h)");
#endif
  } else if (!settings.backend.empty()) {
    flags.fail("--backend " + settings.backend + ": not a backend (gloo, nccl)");
  }
#if !TRACEML_EXAMPLE_GLOO
  if (backend == Backend::kGloo) {
    flags.fail(
        "several ranks or --backend gloo: this build has no Gloo (Gloo's headers, e.g. "
        "Debian's libgloo-dev); use --backend nccl on CUDA");
  }
#endif

  try {
    torch::set_num_threads(static_cast<int>(settings.threads));
    torch::manual_seed(static_cast<std::uint64_t>(settings.seed));
    return train(settings, rendezvous, backend, device);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddp: rank %d: error: %s\n", rendezvous.rank, error.what());
    return 1;
  }
}
