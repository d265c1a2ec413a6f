#pragma once

// Gang placement: the whole gang is placed tentatively against the cache in one call, and the
// decision comes back as a value. Nothing in the cache changes; the caller commits a placement by
// ClusterCache::assume for every assignment, then binds.
// The stages (groups, candidate domains, per-node feasibility, scoring, the fill, the lone pod, the
// verdict, the reservation) are in scheduler/placement/, one header each with its inputs and
// outputs (scheduler/README.md, "Placement in stages"); placement.cc searches and composes them.
//
// Algorithm (DESIGN.md §5):
// 1. Members with equal requests and node constraints form a group; each group is filtered once
//    per node, giving a per-node capacity (how many of its pods the node can take now). Whole
//    domains whose summed free resources cannot hold one pod are skipped without visiting nodes.
// 2. From the host level upward, the lowest level with ONE domain that can hold the whole gang
//    wins; among its domains the tightest fit (fewest pods of room left after placement, then
//    fewest free units of the dominant resource) is chosen. Nodes without a level's label are in
//    no domain at that level.
// 3. Inside the chosen domain the gang is distributed down the tree: a sub-domain (or node) that
//    can take all that remains is used, the tightest such one; otherwise the sub-domain with the
//    most room is filled and the rest continues. This uses as few sub-domains and nodes as possible
//    and fills the fullest one that fits.
// 4. When no single domain at any level fits, the gang spans the cluster the same way (the fewest
//    top-level domains), unless muster.dev/topology-required is set: "required" never falls back.
//    muster.dev/topology-preferred falls back, and the placement says so (fell_back).
// 5. Single pods (gangs of one) pack: the node left with the least free of the pod's dominant
//    resource (GPUs first, then cpu) — most-allocated; or spread: the most — least-allocated.
//    Preferred node affinity comes first; ties go to the first node in topology order, so racks
//    fill one after another and large gangs find whole racks free.
// 6. GPU↔RDMA NIC alignment inside nodes (scheduler/devices.h), for members asking for both a
//    GPU (nvidia.com/gpu or amd.com/gpu) and preferred.jp/rdma, from the nodes' NodeTopology:
//    within the leaf domain being filled, nodes are used in tiers — first as many pods as can get
//    GPUs and NICs behind one deepest PCIe switch (PIX), then under one root port (PXB), then on
//    one NUMA node, then anywhere — each tier with the same tightest / fullest rule, unless that
//    takes more nodes than the plain rule (then the plain rule, with alignment breaking ties
//    among equal room); a gang that fits on one node takes the best-aligned such node; a single
//    pod ranks alignment right after preferred affinity. The network domain is chosen first and
//    alignment never makes a gang span more domains. muster.dev/gpu-nic-affinity: required
//    makes alignment (at most NODE apart) a filter: only aligned capacity counts.
// 7. Members already bound (or assumed) are fixed: the gang is placed in a domain that contains
//    them all. When that is impossible, the result says evict_bound_members: the caller evicts
//    them and requeues the gang, so no gang stays partly bound.
// 8. Members whose DoNotSchedule topology spread constraints count each other (scheduler/spread.h)
//    are placed last in a unit, over the constraint's domains as planGangSpread says (the skew
//    holds once all are placed), counting the members placed before them that it selects.

#include <cstdint>
#include <functional>
#include <string_view>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "scheduler/cache.h"
#include "scheduler/config.h"
#include "scheduler/gang.h"
#include "scheduler/pod_info.h"

namespace muster::scheduler {

struct GangRequest {
  GangKey key;
  std::vector<PodInfoPtr> members;  // pending members to place
  // Members already bound or assumed: pod key → node name. They count towards min_member.
  std::vector<std::pair<std::string, std::string>> bound;
  int32_t min_member = 1;
  int required_level = -1;   // SchedulerConfig::levelIndex; -1: none
  int preferred_level = -1;
  GpuNicAffinity gpu_nic_affinity = GpuNicAffinity::kPreferred;
  // Nodes reserved for other gangs that this gang may not use (SchedulingQueue fills this).
  std::vector<std::string> blocked_nodes;
};

struct PlacementOptions {
  SinglePodStrategy single_pod_strategy = SinglePodStrategy::kPack;
  // Namespace labels, for inter-pod terms' namespaceSelector (none: such selectors match only {}).
  std::function<const proto::Labels*(std::string_view name)> namespace_labels = {};
  // false: an Unschedulable verdict carries no message or per-node reasons (preemption's
  // simulations only ask whether the gang fits; the diagnosis visits every node).
  bool diagnose = true;
  // Skip topology domains by their free-GPU index (Domain::gpu_mask) where no node could take a
  // pod, or none could beat the node found; false visits every node (the same placements: tests
  // compare the two).
  bool gpu_index = true;
};

struct Assignment {
  std::string pod_key;
  std::string node;
  // For a pod asking for a fraction of a GPU: the GPU placement chose for a lone pod (-1: the
  // cache chooses when it is assumed, ClusterCache::assume), then the GPU it was assumed on,
  // written to its muster.dev/gpu-index before the Binding. -1: none.
  int32_t gpu_index = -1;
  friend bool operator==(const Assignment&, const Assignment&) = default;
};

struct GangPlacement {
  GangKey key;
  std::vector<Assignment> assignments;  // one per pending member, in the request's order
  // The chosen domain: level index (levelCount()-1 is the host), its label key and value (the node
  // name at the host level). level -1: the gang spans several top-level domains (or nodes).
  int level = -1;
  std::string level_key;
  std::string domain;
  int domains_spanned = 1;  // top-level domains (or nodes, without levels) used when level is -1
  bool fell_back = false;   // a preferred level was given and not met
  // Members asking for both GPUs and RDMA NICs, and how many of them landed where their devices
  // can be aligned behind one PCIe switch / (only) on one NUMA node, by the nodes' NodeTopology.
  int gpu_nic_pods = 0;
  int gpu_nic_pcie = 0;  // at most PXB apart
  int gpu_nic_pix = 0;   // of those, behind one deepest switch
  int gpu_nic_numa = 0;
  // "muster.dev/rack=r2", "node n7", "3 muster.dev/block domains".
  std::string describe() const;
};

struct Unschedulable {
  std::string message;                // for a person: PodScheduled=False and FailedScheduling
  std::map<std::string, int> reasons;  // per-node reason → number of nodes
  int available_nodes = 0;            // nodes that could take at least one member
  int total_nodes = 0;
  bool waiting_for_members = false;  // fewer members than minMember exist
  bool evict_bound_members = false;  // bound members exist and the rest cannot join them
  // Refused by tenancy (a queue's limit, or no such queue), not by room: no preemption and no
  // reservation; tried again when pods leave or queues change.
  bool waiting_for_quota = false;
};

using PlacementResult = std::variant<GangPlacement, Unschedulable>;

// The verdict for a gang with fewer than min_member members: "gang ns/g is waiting for members:
// 3 of 8 exist".
Unschedulable waitingForMembers(const GangKey& key, int64_t existing, int64_t min_member);

PlacementResult place(const GangRequest& request, const ClusterCache& cache,
                      const PlacementOptions& options = {});

// The nodes a waiting gang should reserve: within the lowest domain (honouring the required level)
// whose nodes, once empty of other pods, could hold the whole gang, the domain with the most room
// now; inside it the nodes with the most room now, until they could hold the gang. Empty when no
// domain could ever hold it.
std::vector<std::string> planReservation(const GangRequest& request, const ClusterCache& cache,
                                         const PlacementOptions& options = {});

}  // namespace muster::scheduler
