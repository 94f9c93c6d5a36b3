//! VIEW_BROKER_STATS_DATA (315) response body (`BrokerStatsData`): one statistic of the broker
//! (`TOPIC_PUT_NUMS` of a topic, `GROUP_GET_NUMS` of `topic@group`, ...) over the last minute, hour
//! and day, as `mqadmin statsAll` and the dashboard's collection task read it.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;

/// `BrokerStatsItem`: what one window saw.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsItem {
    /// Value added per addition (messages per put, for `*_NUMS`), 0 without additions.
    pub avgpt: f64,
    /// Value added in the window.
    pub sum: u64,
    /// Value added per second.
    pub tps: f64,
}

/// `BrokerStatsData`: the three windows of one statistic.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsData {
    /// The last 24 hours (hourly samples).
    pub stats_day: BrokerStatsItem,
    /// The last hour (ten-minute samples).
    pub stats_hour: BrokerStatsItem,
    /// The last minute (ten-second samples).
    pub stats_minute: BrokerStatsItem,
}

impl JsonBody for BrokerStatsData {
    const NAME: &'static str = "BrokerStatsData";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_body_round_trips() {
        let java = br#"{"statsDay":{"avgpt":1.0,"sum":120,"tps":0.5},"statsHour":{"avgpt":1.0,"sum":60,"tps":0.25},"statsMinute":{"avgpt":2.0,"sum":6,"tps":0.1}}"#;
        let body = BrokerStatsData::decode(java).expect("decodes");
        assert_eq!(body.stats_minute, BrokerStatsItem { avgpt: 2.0, sum: 6, tps: 0.1 });
        assert_eq!(body.stats_day.sum, 120);
        assert_eq!(BrokerStatsData::decode(&body.encode().unwrap()).unwrap(), body);
        assert_eq!(BrokerStatsData::decode(b"{}").unwrap(), BrokerStatsData::default());
    }
}
