#include "profiler/cpu_profiler.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <thread>

#include "profiler/allocation.h"
#include "profiler/gpt_block.h"
#include "profiler/gpt_head.h"
#include "sim/plan/simulate.h"

namespace ppsim {
namespace {

using Clock = std::chrono::steady_clock;
namespace k = kernels;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Times F, I, W, B and a recompute (a forward whose result only feeds a
// backward: the same kernel) for one slice shape. The context is filled by a
// forward over `context` earlier tokens that is not timed.
std::vector<KernelSample> time_block(const ProfileRequest& r, int tokens, int context) {
  const k::BlockParams<float> params = k::init_params<float>(r.hidden, r.ffn, r.heads, 1234);
  k::BlockGrads<float> grads = k::zero_params<float>(r.hidden, r.ffn, r.heads);
  const int b = r.micro_batch;
  const k::Mat<float> x = k::Mat<float>::Random(static_cast<int64_t>(b) * tokens, r.hidden);
  const k::Mat<float> dy = k::Mat<float>::Random(static_cast<int64_t>(b) * tokens, r.hidden);
  const k::Mat<float> prefix =
      k::Mat<float>::Random(static_cast<int64_t>(b) * std::max(context, 1), r.hidden);
  k::KvCache<float> kv(b, r.hidden, context + tokens);
  if (context > 0) {
    k::Saved<float> unused;
    k::forward(params, k::Mat<float>(prefix.topRows(static_cast<int64_t>(b) * context)), &kv,
               &unused);
  }
  k::KvGrad<float> kv_grad(b, r.hidden, context + tokens);
  std::vector<double> f, i, w, full, recompute;
  // What the layer holds after F and after I, in bytes; the same every
  // repetition, and read outside the timed spans.
  int64_t after_forward = 0, after_input = 0;
  for (int rep = -r.warmup; rep < r.repetitions; ++rep) {
    k::Saved<float> saved;
    Clock::time_point t = Clock::now();
    k::forward(params, x, &kv, &saved);
    const double forward_s = seconds_since(t);
    after_forward = saved.bytes();
    t = Clock::now();
    k::backward_input(params, dy, &kv, &kv_grad, &saved);
    const double input_s = seconds_since(t);
    after_input = saved.bytes();
    t = Clock::now();
    k::backward_weight(params, &saved, &grads);
    const double weight_s = seconds_since(t);
    k::Saved<float> again;
    t = Clock::now();
    k::forward(params, x, &kv, &again);
    const double recompute_s = seconds_since(t);
    t = Clock::now();
    k::backward(params, dy, &kv, &kv_grad, &again, &grads);
    const double backward_s = seconds_since(t);
    if (rep < 0) continue;  // warm-up: caches, page faults, frequency
    f.push_back(forward_s);
    i.push_back(input_s);
    w.push_back(weight_s);
    recompute.push_back(recompute_s);
    full.push_back(backward_s);
  }
  KernelSample forward = summarize_samples(KernelKind::kForward, r, tokens, context, f);
  forward.activation_bytes = after_forward;
  forward.weight_grad_bytes = after_input;
  return {std::move(forward), summarize_samples(KernelKind::kBackward, r, tokens, context, full),
          summarize_samples(KernelKind::kBackwardInput, r, tokens, context, i),
          summarize_samples(KernelKind::kBackwardWeight, r, tokens, context, w),
          summarize_samples(KernelKind::kRecompute, r, tokens, context, recompute)};
}

// The two ends of the model for one slice shape, as the runtime's first and
// last stages run them (profiler/gpt_head.h). The embedding: F the lookup,
// W the scatter of the input gradient into the tables, which is all of its
// backward (its input is token ids, so it has no I), so `backward` carries
// W's figures too; it holds nothing after F and, after I, the input gradient
// the first block's I hands it (b l h scalars) until W. The head (final layer
// norm, output projection, softmax cross-entropy): F, I, W and B = I then W,
// and LossSaved::bytes() after F and after I.
std::vector<KernelSample> time_ends(const ProfileRequest& r, int tokens, int context) {
  const int b = r.micro_batch;
  const int n = b * tokens;
  const k::HeadParams<float> params =
      k::init_head_params<float>(r.vocab, r.hidden, context + tokens, 1234);
  k::HeadGrads<float> grads = k::zero_head_params<float>(r.vocab, r.hidden, context + tokens);
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((7LL * i + 3) % r.vocab);
  const k::Mat<float> y = k::Mat<float>::Random(n, r.hidden);
  const k::Mat<float> dx = k::Mat<float>::Random(n, r.hidden);
  const float scale = 1.0f / static_cast<float>(n);
  std::vector<double> embed_f, embed_w, f, i, w, full;
  int64_t after_forward = 0, after_input = 0;
  for (int rep = -r.warmup; rep < r.repetitions; ++rep) {
    Clock::time_point t = Clock::now();
    const k::Mat<float> x = k::embed_forward(params, ids, b, context);
    const double embed_forward_s = seconds_since(t);
    t = Clock::now();
    k::embed_backward_weight(ids, b, context, dx, &grads);
    const double embed_weight_s = seconds_since(t);
    k::LossSaved<float> saved;
    t = Clock::now();
    k::loss_forward(params, y, ids, scale, &saved);
    const double forward_s = seconds_since(t);
    after_forward = saved.bytes();
    t = Clock::now();
    k::loss_backward_input(params, &saved);
    const double input_s = seconds_since(t);
    after_input = saved.bytes();
    t = Clock::now();
    k::loss_backward_weight(params, &saved, &grads);
    const double weight_s = seconds_since(t);
    k::loss_forward(params, y, ids, scale, &saved);
    t = Clock::now();
    k::loss_backward_input(params, &saved);
    k::loss_backward_weight(params, &saved, &grads);
    const double backward_s = seconds_since(t);
    if (rep < 0) continue;  // warm-up
    embed_f.push_back(embed_forward_s);
    embed_w.push_back(embed_weight_s);
    f.push_back(forward_s);
    i.push_back(input_s);
    w.push_back(weight_s);
    full.push_back(backward_s);
  }
  KernelSample embed_forward =
      part_sample(KernelKind::kForward, KernelPart::kEmbedding, r, tokens, context, embed_f);
  embed_forward.weight_grad_bytes = dx.size() * static_cast<int64_t>(sizeof(float));
  KernelSample head_forward =
      part_sample(KernelKind::kForward, KernelPart::kHead, r, tokens, context, f);
  head_forward.activation_bytes = after_forward;
  head_forward.weight_grad_bytes = after_input;
  return {
      std::move(embed_forward),
      part_sample(KernelKind::kBackward, KernelPart::kEmbedding, r, tokens, context, embed_w),
      part_sample(KernelKind::kBackwardWeight, KernelPart::kEmbedding, r, tokens, context, embed_w),
      std::move(head_forward),
      part_sample(KernelKind::kBackward, KernelPart::kHead, r, tokens, context, full),
      part_sample(KernelKind::kBackwardInput, KernelPart::kHead, r, tokens, context, i),
      part_sample(KernelKind::kBackwardWeight, KernelPart::kHead, r, tokens, context, w)};
}

// A buffer handed to another thread, which copies it into its own memory: the
// time from the hand-off to the copy's end, what the threads runtime pays
// for each activation or gradient it sends. One receiver thread, already
// waiting, serves every measurement, so its start-up is not counted.
std::vector<LinkSample> time_thread_copies(const ProfileRequest& r) {
  std::mutex mu;
  std::condition_variable cv;
  const std::vector<char>* source = nullptr;  // the hand-off; null when none is pending
  std::vector<char> target;
  bool copied = false;
  bool done = false;
  bool ready = false;
  std::thread receiver([&] {
    std::unique_lock<std::mutex> lock(mu);
    ready = true;
    cv.notify_all();
    while (true) {
      cv.wait(lock, [&] { return source != nullptr || done; });
      if (source == nullptr) return;
      std::memcpy(target.data(), source->data(), source->size());
      source = nullptr;
      copied = true;
      cv.notify_all();
    }
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ready; });
  }
  // At least one untimed hand-off per size: the first touches fresh pages.
  const int warmup = std::max(r.warmup, 1);
  std::vector<LinkSample> samples;
  for (int64_t size : r.link_sizes) {
    const std::vector<char> buffer(size, 1);
    {
      std::lock_guard<std::mutex> lock(mu);
      target.assign(size, 0);
    }
    std::vector<double> times;
    for (int rep = -warmup; rep < r.repetitions; ++rep) {
      const Clock::time_point start = Clock::now();
      {
        std::lock_guard<std::mutex> lock(mu);
        source = &buffer;
        copied = false;
      }
      cv.notify_all();
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return copied; });
      }
      if (rep >= 0) times.push_back(seconds_since(start));
    }
    std::sort(times.begin(), times.end());
    samples.push_back({size, times[times.size() / 2]});
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  receiver.join();
  return samples;
}

std::string cpu_model() {
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

}  // namespace

Status check_request(const ProfileRequest& r) {
  if (r.hidden < 1 || r.heads < 1 || r.hidden % r.heads != 0 || r.ffn < 1 || r.micro_batch < 1 ||
      r.vocab < 0 || r.shapes.empty() || r.repetitions < 1 || r.warmup < 0) {
    return Error{fmt::format(
        "profile: needs hidden, ffn, heads and micro_batch >= 1 with heads dividing hidden, "
        "vocab >= 0, at least one shape and one repetition (hidden {}, ffn {}, heads {}, "
        "micro_batch {}, vocab {}, {} shapes, {} repetitions)",
        r.hidden, r.ffn, r.heads, r.micro_batch, r.vocab, r.shapes.size(), r.repetitions)};
  }
  return {};
}

KernelSample summarize_samples(KernelKind kind, const ProfileRequest& r, int tokens, int context,
                               std::vector<double> samples) {
  PPSIM_CHECK(!samples.empty());
  std::sort(samples.begin(), samples.end());
  KernelSample s;
  s.kind = kind;
  s.micro_batch = r.micro_batch;
  s.tokens = tokens;
  s.context = context;
  s.hidden = r.hidden;
  s.ffn = r.ffn;
  s.heads = r.heads;
  s.tensor = 1;
  s.median_s = samples[samples.size() / 2];
  s.min_s = samples.front();
  s.max_s = samples.back();
  s.repetitions = static_cast<int>(samples.size());
  return s;
}

KernelSample part_sample(KernelKind kind, KernelPart part, const ProfileRequest& r, int tokens,
                         int context, std::vector<double> samples) {
  KernelSample s = summarize_samples(kind, r, tokens, context, std::move(samples));
  s.part = part;
  s.vocab = r.vocab;
  s.ffn = s.heads = 0;
  return s;
}

ProfileProvenance profile_provenance(const ProfileRequest& r, std::string tool) {
  ProfileProvenance p;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p.host = host;
  p.cpu = fmt::format("{} ({} threads)", cpu_model(), std::thread::hardware_concurrency());
#ifdef NDEBUG
  p.build = fmt::format("g++ {}, optimized", __VERSION__);
#else
  p.build = fmt::format("g++ {}, debug", __VERSION__);
#endif
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  p.date = date;
  p.tool = std::move(tool);
  p.repetitions = r.repetitions;
  p.warmup = r.warmup;
  return p;
}

Result<LinkFit> measure_link(const std::string& name,
                             const std::function<Result<std::vector<LinkSample>>()>& measure) {
  Result<LinkFit> link = Error{"not measured"};
  for (int attempt = 0; attempt < 3 && !link; ++attempt) {
    Result<std::vector<LinkSample>> samples = measure();
    if (!samples) return samples.error();
    link = fit_link(name, std::move(*samples));
  }
  return link;
}

Status check_runnable_model(const Config& config, std::string_view tool) {
  if (!config.model) return Error{fmt::format("{}: {} needs a model section", config.source, tool)};
  if (const char* key = gpt_block_misfit(*config.model)) {
    return Error{fmt::format(
        "{}: model.{}: {} cannot run this model: the profilers and the runtime build only the "
        "GPT-3 block ({})",
        config.source, key, tool, kGpt3BlockParts)};
  }
  return Status();
}

Result<ProfileRequest> request_for(const Config& config) {
  PPSIM_CHECK(config.model.has_value());
  if (Status st = check_runnable_model(config, "ppsim profile"); !st) return Error{st.message()};
  ProfileRequest r;
  r.micro_batch = config.training.micro_batch;
  r.hidden = config.model->hidden;
  r.ffn = config.model->ffn_hidden;
  r.heads = config.model->heads;
  r.vocab = config.model->vocab;
  Result<std::vector<int>> lengths = slice_lengths_for(config);
  if (!lengths) return lengths.error();
  if (lengths->empty()) {
    r.shapes.emplace_back(config.model->seq_len, 0);
  } else {
    int context = 0;
    for (int l : *lengths) {
      if (std::find(r.shapes.begin(), r.shapes.end(), std::pair{l, context}) == r.shapes.end()) {
        r.shapes.emplace_back(l, context);
      }
      context += l;
    }
  }
  return r;
}

// The runtime's optimizer step (sgd_update) on one block's weights: the
// same at every shape, so timed once and recorded at the first.
KernelSample time_optimizer_step(const ProfileRequest& r) {
  k::BlockParams<float> params = k::init_params<float>(r.hidden, r.ffn, r.heads, 1234);
  k::BlockGrads<float> grads = k::zero_params<float>(r.hidden, r.ffn, r.heads);
  std::vector<double> samples;
  for (int rep = -r.warmup; rep < r.repetitions; ++rep) {
    const Clock::time_point t = Clock::now();
    k::sgd_update(params.tensors(), grads.tensors(), 1e-3);
    if (rep >= 0) samples.push_back(seconds_since(t));
  }
  const auto [tokens, context] = r.shapes.front();
  return summarize_samples(KernelKind::kOptimizerStep, r, tokens, context, samples);
}

Result<CostProfile> profile_cpu(const ProfileRequest& r,
                                const std::function<void(int, int)>& progress) {
  if (Status st = check_request(r); !st) return Error{st.message()};
  k::retain_freed_memory();  // as the runtime does
  CostProfile profile;
  profile.provenance = profile_provenance(r, "ppsim-profile 0.1.0 (CPU, fp32, steady clock)");
  const int total = static_cast<int>(r.shapes.size()) + (r.link_sizes.empty() ? 0 : 1);
  int done = 0;
  for (const auto& [tokens, context] : r.shapes) {
    for (KernelSample& s : time_block(r, tokens, context)) profile.kernels.push_back(std::move(s));
    if (r.vocab > 0) {
      for (KernelSample& s : time_ends(r, tokens, context)) profile.kernels.push_back(std::move(s));
    }
    if (progress) progress(++done, total);
  }
  profile.kernels.push_back(time_optimizer_step(r));
  if (r.link_sizes.empty()) return profile;  // kernels only
  Result<LinkFit> link = measure_link(
      "thread-copy", [&]() -> Result<std::vector<LinkSample>> { return time_thread_copies(r); });
  if (!link) return Error{fmt::format("profile: thread copies: {}", link.error().message)};
  profile.links.push_back(std::move(*link));
  if (progress) progress(++done, total);
  return profile;
}

}  // namespace ppsim
