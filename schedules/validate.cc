#include "schedules/validate.h"

#include <fmt/format.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <vector>

#include "schedules/action_index.h"

namespace ppsim {
namespace {

// Schedule::comm_posts: none, or one entry per action, each send posted
// after its action and each receive before it (before its pair, for the
// backward of an overlapped pair: the pair starts with both inputs in).
Status check_comm_posts(const Schedule& s) {
  if (s.comm_posts.empty()) return {};
  if (s.comm_posts.size() != s.programs.size()) {
    return Error{fmt::format("schedule {}: transfer posts for {} ranks, programs for {}", s.name,
                             s.comm_posts.size(), s.programs.size())};
  }
  for (size_t rank = 0; rank < s.programs.size(); ++rank) {
    const std::vector<CommPosts>& posts = s.comm_posts[rank];
    if (posts.size() != s.programs[rank].size()) {
      return Error{fmt::format("schedule {}: rank {} has transfer posts for {} actions, runs {}",
                               s.name, rank, posts.size(), s.programs[rank].size())};
    }
    const auto size = static_cast<int32_t>(posts.size());
    for (int32_t pos = 0; pos < size; ++pos) {
      const CommPosts& p = posts[pos];
      const bool paired = pos > 0 && s.programs[rank][pos - 1].overlaps_next;
      const int32_t latest_recv = paired ? pos - 1 : pos;
      if ((p.send_after != -1 && (p.send_after <= pos || p.send_after > size)) ||
          (p.recv_after != -1 && (p.recv_after < 0 || p.recv_after > latest_recv))) {
        return Error{fmt::format(
            "schedule {}: rank {} posts the transfers of {} after {} and {} of its actions: a "
            "send is posted after its action, a receive before it",
            s.name, rank, to_string(s.programs[rank][pos]), p.send_after, p.recv_after)};
      }
    }
  }
  return {};
}

Status check_shape(const Schedule& s) {
  if (s.num_ranks < 1 || static_cast<int>(s.programs.size()) != s.num_ranks) {
    return Error{fmt::format("schedule {}: {} programs for {} ranks", s.name, s.programs.size(),
                             s.num_ranks)};
  }
  if (s.num_stages < 1 || static_cast<int>(s.stage_rank.size()) != s.num_stages) {
    return Error{fmt::format("schedule {}: {} stage owners for {} stages", s.name,
                             s.stage_rank.size(), s.num_stages)};
  }
  if (s.num_microbatches < 1) {
    return Error{fmt::format("schedule {}: needs at least one microbatch", s.name)};
  }
  if (s.num_slices < 1) {
    return Error{fmt::format("schedule {}: needs at least one slice per microbatch", s.name)};
  }
  if (s.num_chains < 1 || s.num_stages % s.num_chains != 0 ||
      s.num_microbatches % s.num_chains != 0) {
    return Error{fmt::format(
        "schedule {}: {} chains of stages do not divide its {} stages and {} microbatches", s.name,
        s.num_chains, s.num_stages, s.num_microbatches)};
  }
  if (Status st = check_comm_posts(s); !st) return st;
  for (int stage = 0; stage < s.num_stages; ++stage) {
    if (s.stage_rank[stage] < 0 || s.stage_rank[stage] >= s.num_ranks) {
      return Error{fmt::format("schedule {}: stage {} is owned by rank {}, not one of 0..{}",
                               s.name, stage, s.stage_rank[stage], s.num_ranks - 1)};
    }
  }
  return {};
}

// The (stage, microbatch, slice) of `forward` has a forward and exactly one
// form of backward.
Status check_one(const ActionIndex& index, const Action& forward) {
  const auto with = [&](ActionKind k) {
    Action a = forward;
    a.kind = k;
    return a;
  };
  const auto name = [&](ActionKind k) { return to_string(with(k)); };
  const bool b = index.contains(with(ActionKind::kBackward));
  const bool i = index.contains(with(ActionKind::kBackwardInput));
  const bool w = index.contains(with(ActionKind::kBackwardWeight));
  if (!index.contains(forward)) return Error{fmt::format("missing {}", name(ActionKind::kForward))};
  if (b && (i || w)) {
    return Error{fmt::format("{} and a split backward ({} / {}) both appear",
                             name(ActionKind::kBackward), name(ActionKind::kBackwardInput),
                             name(ActionKind::kBackwardWeight))};
  }
  if (!b && !i && !w) {
    return Error{fmt::format("missing the backward of stage {} microbatch {}{} ({}, or {} and {})",
                             forward.stage, forward.microbatch,
                             forward.slice > 0 ? fmt::format(" slice {}", forward.slice) : "",
                             name(ActionKind::kBackward), name(ActionKind::kBackwardInput),
                             name(ActionKind::kBackwardWeight))};
  }
  if (i != w) {
    return Error{fmt::format("missing {}: a split backward needs both I and W",
                             name(i ? ActionKind::kBackwardWeight : ActionKind::kBackwardInput))};
  }
  return {};
}

// An overlapped pair (Action::overlaps_next) is a forward and then, next in
// its program, a backward (B or I) that does not need that forward: the
// pair starts only once both may, so such a backward would wait for itself.
Status check_pair(const Schedule& s, int rank, size_t pos) {
  const std::vector<Action>& program = s.programs[rank];
  const Action& forward = program[pos];
  if (forward.kind != ActionKind::kForward) {
    return Error{fmt::format(
        "rank {} runs {} overlapped with the next action, but only a forward pairs with a "
        "backward (an overlapped pair is F then B or I)",
        rank, to_string(forward))};
  }
  if (pos + 1 == program.size() || !sends_input_gradient(program[pos + 1].kind)) {
    return Error{fmt::format(
        "rank {} runs {} overlapped with the next action, {}: an overlapped pair is a forward and "
        "then a backward (B or I)",
        rank, to_string(forward),
        pos + 1 == program.size() ? "but it is the last"
                                  : "but " + to_string(program[pos + 1]) + " is not a backward")};
  }
  const Action& backward = program[pos + 1];
  if (backward.stage == forward.stage && backward.microbatch == forward.microbatch &&
      backward.slice == forward.slice) {
    return Error{fmt::format(
        "deadlock in schedule {}: the overlapped pair ({};{}) on rank {} waits for itself: {} "
        "needs {}'s output, and the pair starts only when both may",
        s.name, to_string(forward), to_string(backward), rank, to_string(backward),
        to_string(forward))};
  }
  return {};
}

// Each action once, on the owning rank, and each (stage, microbatch) of the
// microbatch's chain with a forward and exactly one form of backward.
Status check_coverage(const Schedule& s, ActionIndex& index) {
  // A microbatch passes through its chain's stages only; with one chain,
  // through all (and no division per action to say so).
  const bool one_chain = s.num_chains == 1;
  // One unsigned comparison each: a negative value wraps past the bound.
  const auto below = [](int32_t value, int bound) {
    return static_cast<uint32_t>(value) < static_cast<uint32_t>(bound);
  };
  int node = 0;
  for (int rank = 0; rank < s.num_ranks; ++rank) {
    const std::vector<Action>& program = s.programs[rank];
    for (size_t pos = 0, size = program.size(); pos < size; ++pos) {
      const Action& a = program[pos];
      if (!below(a.stage, s.num_stages) || !below(a.microbatch, s.num_microbatches) ||
          !below(a.slice, s.num_slices)) {
        return Error{fmt::format(
            "rank {} runs {}, outside the {} stages and {} microbatches of this schedule{}", rank,
            to_string(a), s.num_stages, s.num_microbatches,
            s.num_slices > 1 ? fmt::format(" ({} slices each)", s.num_slices) : "")};
      }
      if (s.stage_rank[a.stage] != rank) {
        return Error{fmt::format("rank {} runs {}, but stage {} belongs to rank {}", rank,
                                 to_string(a), a.stage, s.stage_rank[a.stage])};
      }
      if (!one_chain && s.chain_of_stage(a.stage) != s.chain_of_microbatch(a.microbatch)) {
        const int chain = s.chain_of_microbatch(a.microbatch);
        return Error{fmt::format(
            "rank {} runs {}, but microbatch {} passes through stages {}..{} only (chain {} of {})",
            rank, to_string(a), a.microbatch, chain * s.stages_per_chain(),
            (chain + 1) * s.stages_per_chain() - 1, chain, s.num_chains)};
      }
      int32_t& slot = index[a];
      if (slot >= 0) return Error{fmt::format("{} appears more than once", to_string(a))};
      slot = node++;
      if (a.overlaps_next) {
        if (Status st = check_pair(s, rank, pos); !st) return st;
      }
    }
  }
  for (int stage = 0; stage < s.num_stages; ++stage) {
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      if (!one_chain && s.chain_of_microbatch(mb) != s.chain_of_stage(stage)) continue;
      for (int slice = 0; slice < s.num_slices; ++slice) {
        if (Status st = check_one(index, Action{ActionKind::kForward, stage, mb, slice}); !st) {
          return st;
        }
      }
    }
  }
  return {};
}

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

// Edges point from an action to what it waits for. The forward of an
// overlapped pair also waits for what its backward waits for; an action
// whose input another rank sends only after later actions (comm_posts)
// waits for those too.
Graph build_wait_graph(const Schedule& s, const ActionIndex& index) {
  Graph g(s.num_actions());
  const auto is_split = [&](int stage, int mb, int slice) {
    return index.contains({ActionKind::kBackwardInput, stage, mb, slice});
  };
  std::vector<int> first_node(s.num_ranks, 0);  // nodes are numbered rank by rank
  for (int rank = 1; rank < s.num_ranks; ++rank) {
    first_node[rank] = first_node[rank - 1] + static_cast<int>(s.programs[rank - 1].size());
  }
  // The action after which `dep`'s output is sent: `dep`, or a later one.
  const auto sent_after = [&](const Action& dep) {
    const int rank = s.stage_rank[dep.stage];
    const int node = index[dep];
    if (s.comm_posts.empty()) return node;
    const int32_t after = s.comm_posts[rank][node - first_node[rank]].send_after;
    return after > 0 ? first_node[rank] + after - 1 : node;
  };
  for (int rank = 0; rank < s.num_ranks; ++rank) {
    const std::vector<Action>& program = s.programs[rank];
    for (size_t pos = 0; pos < program.size(); ++pos) {
      const int node = index[program[pos]];
      if (pos > 0) boost::add_edge(node, index[program[pos - 1]], g);
      const auto wait_for = [&](const Action& dep) {
        boost::add_edge(node, index[dep], g);
        if (s.stage_rank[dep.stage] != rank) boost::add_edge(node, sent_after(dep), g);
      };
      for_each_data_dependency(program[pos], s.stages_per_chain(), s.num_slices, is_split,
                               wait_for);
      if (program[pos].overlaps_next) {
        for_each_data_dependency(program[pos + 1], s.stages_per_chain(), s.num_slices, is_split,
                                 wait_for);
      }
    }
  }
  return g;
}

// The shape and coverage checks, filling `index` (action -> node).
Status check_covered(const Schedule& s, ActionIndex& index) {
  if (Status st = check_shape(s); !st) return st;
  index.reset(s.num_stages, s.num_microbatches, s.num_slices);
  return check_coverage(s, index);
}

}  // namespace

Status validate_coverage(const Schedule& s, ActionIndex* numbered) {
  ActionIndex index;
  return check_covered(s, numbered != nullptr ? *numbered : index);
}

Status validate(const Schedule& s) {
  ActionIndex index;
  if (Status st = check_covered(s, index); !st) return st;

  std::vector<Action> actions;
  actions.reserve(s.num_actions());
  for (const auto& program : s.programs)
    actions.insert(actions.end(), program.begin(), program.end());

  const Graph g = build_wait_graph(s, index);
  std::vector<int> component(boost::num_vertices(g));
  const int num_components = boost::strong_components(g, component.data());
  if (num_components == static_cast<int>(actions.size())) return {};

  // A strongly connected component of more than one action is a deadlock.
  // Every member waits for another member, so walking such edges from any
  // member must revisit one: that closes the cycle we report.
  std::vector<int> size(num_components, 0);
  for (int c : component) ++size[c];
  size_t start = 0;
  while (size[component[start]] < 2) ++start;
  std::vector<int> position(actions.size(), -1);
  std::vector<size_t> path;
  size_t node = start;
  while (position[node] < 0) {
    position[node] = static_cast<int>(path.size());
    path.push_back(node);
    for (auto [e, end] = boost::out_edges(node, g); e != end; ++e) {
      const size_t next = boost::target(*e, g);
      if (component[next] == component[node]) {
        node = next;
        break;
      }
    }
  }
  std::string cycle;
  for (size_t k = static_cast<size_t>(position[node]); k < path.size(); ++k) {
    cycle += to_string(actions[path[k]]) + " -> ";
  }
  cycle += to_string(actions[node]);
  return Error{
      fmt::format("deadlock in schedule {}: each action waits for the next: {}", s.name, cycle)};
}

}  // namespace ppsim
