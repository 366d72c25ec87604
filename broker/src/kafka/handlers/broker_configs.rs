//! The only broker configs that change at run time: Kafka's replication throttle rates
//! (`leader.replication.throttled.rate`, `follower.replication.throttled.rate`), which
//! kafka-reassign-partitions sets with `--throttle` and clears with `--verify`. Strom has one
//! cluster-wide throttle for replicas being added, so either key on any broker (or the cluster
//! default, an empty name) sets or clears that one rate. Every other broker config is static.

use kafka_protocol::error::ResponseError;

use crate::kafka::error_code;
use crate::node::{Node, CONTROLLER_TIMEOUT};

use super::alter_configs::static_broker_configs;

pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
/// Kafka's throttle for moving replicas between a broker's log dirs; Strom has one log dir
/// per broker, so there is never such a move (clearing it is accepted, setting it is not).
const LOG_DIRS_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";

/// What a request does to the cluster's replication throttle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleChange {
    Unchanged,
    Set(u64),
    Clear,
}

/// One config operation of IncrementalAlterConfigs on a broker: (key, op, value).
pub type BrokerConfigOp<'a> = (&'a str, i8, Option<&'a str>);

/// Decides what a broker resource's operations do (op codes as IncrementalAlterConfigs: 0 SET,
/// 1 DELETE); a later operation wins over an earlier one.
pub fn decide(ops: &[BrokerConfigOp<'_>]) -> Result<ThrottleChange, (i16, String)> {
    let invalid = |m: String| (ResponseError::InvalidConfig.code(), m);
    let mut change = ThrottleChange::Unchanged;
    for (key, op, value) in ops {
        match (*key, *op) {
            (LEADER_RATE | FOLLOWER_RATE, 0) => {
                let v = value.ok_or_else(|| invalid(format!("SET of {key} needs a value")))?;
                let rate: u64 =
                    v.trim().parse().map_err(|_| invalid(format!("{key}={v}: not a rate in bytes per second")))?;
                if rate == 0 {
                    return Err(invalid(format!(
                        "{key}=0 would stop replication; delete the key to remove the throttle"
                    )));
                }
                change = ThrottleChange::Set(rate);
            }
            (LEADER_RATE | FOLLOWER_RATE, 1) => change = ThrottleChange::Clear,
            (LOG_DIRS_RATE, 1) => {}
            (LOG_DIRS_RATE, 0) => {
                return Err(invalid(format!(
                    "{key}: a Strom broker has one log directory, there is no move between log directories to throttle"
                )))
            }
            (LEADER_RATE | FOLLOWER_RATE | LOG_DIRS_RATE, op) => {
                return Err((
                    ResponseError::InvalidRequest.code(),
                    format!("{key} is not a list; operation {op} does not apply"),
                ))
            }
            (other, _) => {
                let (code, message) = static_broker_configs();
                return Err((code, format!("{other}: {message}")));
            }
        }
    }
    Ok(change)
}

/// Applies one broker resource's operations (`name` is a broker id or empty for the cluster).
pub async fn alter(
    node: &Node,
    name: &str,
    ops: &[BrokerConfigOp<'_>],
    validate_only: bool,
) -> Result<(), (i16, String)> {
    let image = node.catalog.image();
    if !name.is_empty() {
        let known = name.parse::<i32>().ok().is_some_and(|id| image.broker(id).is_some());
        if !known {
            return Err((
                ResponseError::InvalidRequest.code(),
                format!("broker {name:?} is not a broker of this cluster"),
            ));
        }
    }
    let wanted = match decide(ops)? {
        ThrottleChange::Unchanged => return Ok(()),
        ThrottleChange::Set(rate) => Some(rate),
        ThrottleChange::Clear => None,
    };
    if validate_only || wanted == image.replication_throttle {
        return Ok(());
    }
    node.metadata
        .client
        .set_replication_throttle(wanted, CONTROLLER_TIMEOUT)
        .await
        .map_err(|e| (error_code::controller(&e), error_code::message(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_tools_set_and_clear_the_rate() {
        let set = [(LEADER_RATE, 0, Some("1000")), (FOLLOWER_RATE, 0, Some("1000"))];
        assert_eq!(decide(&set), Ok(ThrottleChange::Set(1000)));
        let clear = [(LEADER_RATE, 1, None), (FOLLOWER_RATE, 1, None), (LOG_DIRS_RATE, 1, None)];
        assert_eq!(decide(&clear), Ok(ThrottleChange::Clear));
        assert_eq!(decide(&[]), Ok(ThrottleChange::Unchanged));
        assert_eq!(decide(&[(LOG_DIRS_RATE, 1, None)]), Ok(ThrottleChange::Unchanged));
    }

    #[test]
    fn anything_else_is_refused_with_its_name() {
        for ops in [
            vec![(LEADER_RATE, 0, Some("fast"))],
            vec![(LEADER_RATE, 0, Some("0"))],
            vec![(LEADER_RATE, 0, None)],
            vec![(FOLLOWER_RATE, 2, Some("5"))],
            vec![(LOG_DIRS_RATE, 0, Some("5"))],
            vec![(LEADER_RATE, 0, Some("5")), ("log.retention.ms", 0, Some("5"))],
        ] {
            let (_, message) = decide(&ops).expect_err("refused");
            assert!(ops.iter().any(|(k, _, _)| message.contains(k)), "{message}");
        }
    }
}
