// Package placement is the cluster-placer adapter: it places each new Cluster on one of the fleet's
// ManagementClusters, reports the placement on the cluster for the hostedcluster-applier to obey, and frees the
// slot once the deleted cluster's HostedCluster is gone (docs/management-clusters.md).
//
// # One decider
//
// Placement is a decision over the whole fleet (which management cluster is least used, which has room), so it has
// exactly one decider: this adapter, in one process. A transaction in the API would have put that business logic
// into the API, which keeps none; two deciders (shards, replicas) would each see a slot free and both take it.
// The placer refuses --shard-count above 1, and its Deployment has one replica with the Recreate strategy, so that
// an old and a new process never decide side by side.
//
// # The ledger
//
// The placer decides under one mutex against a ledger of every placement it holds (cluster id → management
// cluster, and a count per management cluster). A decision counts the ledger, not the applier's report of what
// HostedClusters exist, because a cluster placed a moment ago has no HostedCluster yet: counting the applier
// would let a burst of creates overshoot. A placement is recorded in the ledger before its report is posted, so
// the next decision already counts it.
//
// The ledger is kept nowhere but in memory and in the placer's own reports, which carry each placement in
// data.management_cluster (and which the API also reads to refuse deleting a management cluster still in use).
// Before its first decision the placer rebuilds the ledger from those reports, deleting clusters included: a
// deleting cluster keeps its slot until the applier has finalized it. A Finalized report's slot is free.
//
// A placement never changes (HyperShift has no live migration of a hosted control plane): a cluster the ledger
// knows is reported where it is, whether that management cluster is now cordoned, full or unreachable.
//
// A cluster removed without its finalizers (an admin's force-delete) leaves its slot in the ledger; a prune every
// few minutes drops the placements of clusters the API no longer has.
//
// The decision itself is the pure function Choose, table-tested; the conditions are built by the pure functions of
// status.go.
package placement
