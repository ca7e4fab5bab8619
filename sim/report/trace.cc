#include "sim/report/trace.h"

#include <fmt/format.h>

#include "sim/core/json.h"

namespace ppsim {
namespace {

constexpr int kComputeTid = 0;

double micros(Picos t) { return static_cast<double>(t) * 1e-6; }

// Track of rank `src`'s outgoing link towards `dst`: 1 + dst keeps it unique.
int link_tid(int dst) { return 1 + dst; }

void metadata(JsonWriter& w, const char* what, int pid, int tid, const std::string& name) {
  w.begin_object().field("ph", "M").field("name", what).field("pid", pid).field("tid", tid);
  w.key("args").begin_object().field("name", name).end_object().end_object();
}

void span(JsonWriter& w, const std::string& name, const char* cat, int pid, int tid, Picos start,
          Picos end) {
  w.begin_object().field("ph", "X").field("name", name).field("cat", cat);
  w.field("pid", pid).field("tid", tid).field("ts", micros(start));
  w.field("dur", micros(end - start));
}

}  // namespace

namespace {

// One run's events; its ranks are processes pid_base + rank, named
// "<label> rank r", its flow ids start at flow_base.
void write_run(JsonWriter& w, const Timeline& t, const std::string& label, int pid_base,
               int64_t flow_base) {
  const auto pid = [&](int rank) { return pid_base + rank; };
  const std::string prefix = label.empty() ? "" : label + " ";
  for (int rank = 0; rank < t.num_ranks; ++rank) {
    metadata(w, "process_name", pid(rank), 0, fmt::format("{}rank {}", prefix, rank));
    w.begin_object().field("ph", "M").field("name", "process_sort_index").field("pid", pid(rank));
    w.key("args").begin_object().field("sort_index", pid(rank)).end_object().end_object();
    metadata(w, "thread_name", pid(rank), kComputeTid, "compute");
  }
  for (size_t k = 0; k < t.actions.size(); ++k) {
    const ActionRecord& a = t.actions[k];
    const char cat[2] = {action_kind_letter(a.action.kind), '\0'};
    span(w, to_string(a.action), cat, pid(a.rank), kComputeTid, a.start, a.end);
    w.key("args").begin_object().field("stage", a.action.stage);
    w.field("microbatch", a.action.microbatch).field("iteration", a.iteration);
    if (const int64_t partner = t.overlap_partner(k); partner >= 0) {
      w.field("overlapped_with", to_string(t.actions[partner].action));
    }
    w.end_object().end_object();
  }
  for (const EpilogueRecord& e : t.epilogue) {
    span(w, to_string(e.kind), to_string(e.kind), pid(e.rank), kComputeTid, e.start, e.end);
    w.key("args").begin_object().field("iteration", e.iteration).end_object().end_object();
  }
  std::vector<bool> named(static_cast<size_t>(t.num_ranks) * t.num_ranks, false);
  for (size_t k = 0; k < t.transfers.size(); ++k) {
    const TransferRecord& x = t.transfers[k];
    const int src = t.src_rank(x);
    const int dst = t.dst_rank(x);
    const int tid = link_tid(dst);
    if (!named[static_cast<size_t>(src) * t.num_ranks + dst]) {
      named[static_cast<size_t>(src) * t.num_ranks + dst] = true;
      metadata(w, "thread_name", pid(src), tid, fmt::format("send to rank {}", dst));
    }
    const ActionRecord& producer = t.actions[x.producer];
    const ActionRecord& consumer = t.actions[x.consumer];
    const bool activation = producer.action.kind == ActionKind::kForward;
    span(w, fmt::format("{} {}", activation ? "act" : "grad", to_string(producer.action)),
         "transfer", pid(src), tid, x.start, x.end);
    w.key("args").begin_object().field("bytes", t.bytes(x)).field("ready_us", micros(t.ready(x)));
    w.field("to", to_string(consumer.action)).end_object().end_object();
    // The arrow leaves the transfer and lands on the action that receives it.
    const int64_t id = flow_base + static_cast<int64_t>(k);
    w.begin_object().field("ph", "s").field("name", "p2p").field("cat", "flow");
    w.field("id", id).field("pid", pid(src)).field("tid", tid);
    w.field("ts", micros(x.start)).end_object();
    w.begin_object().field("ph", "f").field("bp", "e").field("name", "p2p").field("cat", "flow");
    w.field("id", id).field("pid", pid(dst)).field("tid", kComputeTid);
    w.field("ts", micros(consumer.start)).end_object();
  }
  std::vector<int64_t> level(t.num_ranks, 0);
  for (int rank = 0; rank < t.num_ranks; ++rank) {
    level[rank] = rank < static_cast<int>(t.static_bytes.size()) ? t.static_bytes[rank] : 0;
    w.begin_object().field("ph", "C").field("name", "memory").field("pid", pid(rank));
    w.field("ts", 0.0).key("args").begin_object().field("bytes", level[rank]);
    w.end_object().end_object();
  }
  for (const MemoryEvent& m : memory_events(t)) {
    level[m.rank] += m.delta_bytes;
    w.begin_object().field("ph", "C").field("name", "memory").field("pid", pid(m.rank));
    w.field("ts", micros(m.time)).key("args").begin_object().field("bytes", level[m.rank]);
    w.end_object().end_object();
  }
}

}  // namespace

std::string chrome_trace_json(const std::vector<TraceRun>& runs) {
  size_t events = 0;
  for (const TraceRun& r : runs)
    events += r.timeline->actions.size() + r.timeline->transfers.size();
  std::string out;
  out.reserve(256 * events + 4096);
  JsonWriter w(&out);
  w.begin_object().field("displayTimeUnit", "ms").key("traceEvents").begin_array();
  int pid_base = 0;
  int64_t flow_base = 0;
  for (const TraceRun& r : runs) {
    write_run(w, *r.timeline, r.label, pid_base, flow_base);
    pid_base += r.timeline->num_ranks;
    flow_base += static_cast<int64_t>(r.timeline->transfers.size());
  }
  w.end_array().end_object();
  out += '\n';
  return out;
}

std::string chrome_trace_json(const Timeline& t) { return chrome_trace_json({{"", &t}}); }

}  // namespace ppsim
