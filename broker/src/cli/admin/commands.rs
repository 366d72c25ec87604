//! The clap definitions of the admin commands: what a person types.

use clap::{ArgGroup, Args, Subcommand};

use super::Connection;

/// One admin command with its connection flags.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// The cluster: brokers, controller, unhealthy partitions, leader elections.
    Cluster(ClusterArgs),
    /// Create, list, describe, alter and delete topics.
    Topic(TopicArgs),
    /// Even out replicas and leaders over the brokers (plan, execute, status, cancel).
    Rebalance(RebalanceArgs),
    /// Drain and remove brokers.
    Broker(BrokerArgs),
    /// List, describe, reset and delete consumer groups.
    Group(GroupArgs),
    /// List and describe transactional ids; abort an open transaction.
    Transactions(TransactionsArgs),
}

impl AdminCommand {
    pub fn connection(&self) -> &Connection {
        match self {
            AdminCommand::Cluster(a) => &a.conn,
            AdminCommand::Topic(a) => &a.conn,
            AdminCommand::Rebalance(a) => &a.conn,
            AdminCommand::Broker(a) => &a.conn,
            AdminCommand::Group(a) => &a.conn,
            AdminCommand::Transactions(a) => &a.conn,
        }
    }
}

#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Brokers (liveness, rack, replicas, leaders, bytes), the controller, and partitions
    /// that are under-replicated, offline or being reassigned.
    Describe,
    /// Moves leadership to each partition's preferred replica (or, with --unclean, to any
    /// live replica of partitions that have no leader: records may be lost).
    ElectLeaders {
        /// Only this topic's partitions.
        #[arg(long)]
        topic: Option<String>,
        /// Only this partition of --topic.
        #[arg(long, requires = "topic")]
        partition: Option<i32>,
        #[arg(long)]
        unclean: bool,
    },
}

#[derive(Debug, Args)]
pub struct TopicArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: TopicCommand,
}

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Creates a topic.
    Create {
        name: String,
        /// Number of partitions (default: the brokers' num.partitions).
        #[arg(long, short = 'p', allow_negative_numbers = true)]
        partitions: Option<i32>,
        /// Replicas per partition (default: the brokers' default.replication.factor).
        #[arg(long, short = 'r', allow_negative_numbers = true)]
        replication_factor: Option<i32>,
        /// A config override, key=value (repeatable), e.g. retention.ms=86400000.
        #[arg(long = "config", short = 'c', value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    /// Lists topics.
    List {
        /// Include __consumer_offsets.
        #[arg(long)]
        internal: bool,
    },
    /// A topic's configs and partitions (leader, replicas, ISR, reassignment).
    Describe { name: String },
    /// Adds partitions, changes the replication factor (by reassignment) or configs.
    Alter {
        name: String,
        /// The new, larger, partition count.
        #[arg(long, short = 'p', allow_negative_numbers = true)]
        partitions: Option<i32>,
        /// The new replication factor.
        #[arg(long, short = 'r', allow_negative_numbers = true)]
        replication_factor: Option<i32>,
        /// Sets a config override, key=value (repeatable).
        #[arg(long = "config", short = 'c', value_name = "KEY=VALUE")]
        configs: Vec<String>,
        /// Removes a config override (repeatable).
        #[arg(long = "delete-config", value_name = "KEY")]
        delete_configs: Vec<String>,
    },
    /// Deletes a topic and all its records.
    Delete { name: String },
}

/// Which brokers a rebalance is about.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("scope").multiple(false).args(["add_brokers", "drain"])))]
pub struct RebalanceScope {
    /// Only move replicas onto these (new) brokers, e.g. --add-brokers 3,4.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub add_brokers: Vec<i32>,
    /// Only move replicas off these brokers, e.g. --drain 4.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub drain: Vec<i32>,
}

/// How to run a rebalance and whether to wait for it.
#[derive(Debug, Clone, Args)]
pub struct ExecuteFlags {
    /// Bytes/s a leader may send to the replicas being added, e.g. 50MiB (default: no limit).
    #[arg(long, value_name = "BYTES")]
    pub throttle: Option<String>,
    /// Return once the moves have started instead of waiting for them to finish.
    #[arg(long)]
    pub no_wait: bool,
    /// Stop waiting after this many seconds (exit code 5; the moves carry on).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
}

#[derive(Debug, Args)]
pub struct RebalanceArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: RebalanceCommand,
}

#[derive(Debug, Subcommand)]
pub enum RebalanceCommand {
    /// Shows what a rebalance would move, and the replicas and leaders per broker after it.
    Plan {
        #[command(flatten)]
        scope: RebalanceScope,
    },
    /// Starts the moves of a fresh plan and waits for them, with a progress bar.
    Execute {
        #[command(flatten)]
        scope: RebalanceScope,
        #[command(flatten)]
        flags: ExecuteFlags,
    },
    /// Partitions still moving, replicas not yet in sync, bytes behind.
    Status {
        /// Wait for the moves to finish, with a progress bar.
        #[arg(long)]
        wait: bool,
        /// Stop waiting after this many seconds (exit code 5).
        #[arg(long, value_name = "SECS")]
        timeout: Option<u64>,
    },
    /// Cancels every reassignment in progress (partitions go back to their old replicas).
    Cancel,
}

#[derive(Debug, Args)]
pub struct BrokerArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: BrokerCommand,
}

#[derive(Debug, Subcommand)]
pub enum BrokerCommand {
    /// Moves every replica off a broker (then `strom broker remove` it).
    Drain {
        id: i32,
        #[command(flatten)]
        flags: ExecuteFlags,
    },
    /// Removes a broker that holds no replicas from the cluster.
    Remove { id: i32 },
}

#[derive(Debug, Args)]
pub struct GroupArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: GroupCommand,
}

/// Where `strom group reset-offsets` moves a group's offsets.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("to").required(true).multiple(false)))]
pub struct ResetTarget {
    /// The first offset still stored.
    #[arg(long, group = "to")]
    pub to_earliest: bool,
    /// The end of each partition (skip everything).
    #[arg(long, group = "to")]
    pub to_latest: bool,
    /// The first record at or after this time, RFC 3339 in UTC, e.g. 2026-12-01T09:30:00Z.
    #[arg(long, group = "to", value_name = "TIME")]
    pub to_datetime: Option<String>,
    /// The first record at or after this time, in ms since the epoch.
    #[arg(long, group = "to", value_name = "MS", allow_negative_numbers = true)]
    pub to_timestamp: Option<i64>,
    /// Exactly this offset (clamped to what is stored).
    #[arg(long, group = "to", value_name = "OFFSET", allow_negative_numbers = true)]
    pub to_offset: Option<i64>,
    /// The committed offset moved by this many records (negative: back).
    #[arg(long, group = "to", value_name = "N", allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
}

#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Lists consumer groups.
    List,
    /// A group's state, members and, per partition, committed offset and lag.
    Describe { group: String },
    /// Moves a group's committed offsets; the group must have no live members.
    ResetOffsets {
        group: String,
        /// The topic whose offsets to move.
        #[arg(long)]
        topic: String,
        /// Only these partitions, e.g. 0,3 (default: all).
        #[arg(long, value_delimiter = ',')]
        partitions: Vec<i32>,
        #[command(flatten)]
        to: ResetTarget,
        /// Show the new offsets without committing them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Deletes a group that has no live members (and its committed offsets).
    Delete { group: String },
}

#[derive(Debug, Args)]
pub struct TransactionsArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: TransactionsCommand,
}

#[derive(Debug, Subcommand)]
pub enum TransactionsCommand {
    /// Lists the transactional ids every coordinator knows.
    List {
        /// Only ids in this state (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
        /// CompleteAbort); repeatable.
        #[arg(long = "state", value_name = "STATE")]
        states: Vec<String>,
    },
    /// One transactional id's producer, epoch, state, timeout and open partitions.
    Describe { transactional_id: String },
    /// Aborts the id's open transaction in a new epoch (its producer is fenced, as by a timeout).
    Abort { transactional_id: String },
}
