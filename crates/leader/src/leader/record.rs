//! The leader election record (client-go's `resourcelock.LeaderElectionRecord`) and its
//! mapping onto a Lease's spec (`LeaseSpecToLeaderElectionRecord` and back).

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// What the lock says about the current term: who holds it, for how long, since when.
///
/// The times are informational: candidates never compare them with their own clock (see
/// [`super::election`]); they only notice that the record changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The holder's identity; empty when nobody holds the lock (after a release).
    pub holder_identity: String,
    pub lease_duration_seconds: i32,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    /// How many times the lock changed hands (the Lease's `leaseTransitions`).
    pub leader_transitions: i32,
}

impl Record {
    /// Reads the record from a Lease's spec; missing fields read as empty or zero.
    pub fn from_spec(spec: &LeaseSpec) -> Record {
        Record {
            holder_identity: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            leader_transitions: spec.lease_transitions.unwrap_or_default(),
        }
    }

    /// The whole Lease spec for this record. As upstream, every field is set (an empty holder
    /// is written as `""`) and the fields leader election does not own are dropped.
    pub fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder_identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.leader_transitions),
            ..LeaseSpec::default()
        }
    }
}

/// `time` cut to the microseconds a `MicroTime` keeps, so that a record we wrote compares equal
/// to the same record read back.
pub fn micro(time: Timestamp) -> Timestamp {
    Timestamp::from_microsecond(time.as_microsecond()).unwrap_or(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trip_keeps_every_field() {
        let now = micro(Timestamp::now());
        let record = Record {
            holder_identity: "host_1".into(),
            lease_duration_seconds: 15,
            acquire_time: Some(now),
            renew_time: Some(now),
            leader_transitions: 3,
        };
        let spec = record.to_spec();
        assert_eq!(spec.holder_identity.as_deref(), Some("host_1"));
        assert_eq!(Record::from_spec(&spec), record);
        let json = serde_json::to_value(&spec).expect("spec serializes");
        let back: LeaseSpec = serde_json::from_value(json).expect("spec deserializes");
        assert_eq!(Record::from_spec(&back), record);
    }

    #[test]
    fn empty_spec_reads_as_an_unheld_record() {
        assert_eq!(Record::from_spec(&LeaseSpec::default()), Record::default());
        let released = Record { lease_duration_seconds: 1, ..Record::default() }.to_spec();
        assert_eq!(released.holder_identity.as_deref(), Some(""));
    }

    #[test]
    fn micro_drops_nanoseconds() {
        let t: Timestamp = "2026-11-22T03:33:51.123456789Z".parse().expect("timestamp");
        assert_eq!(micro(t).to_string(), "2026-11-22T03:33:51.123456Z");
    }
}
