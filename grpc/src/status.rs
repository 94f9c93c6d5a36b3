//! Answers' `apache.rocketmq.v2.Status`: the proto `Code` for each remoting response code, as
//! RocketMQ's proxy maps a broker's answer (`ResponseBuilder.buildStatus`), and the constructors
//! every RPC uses. Pure.
//!
//! A replica that is not the leader and cannot relay answers SERVICE_NOT_AVAILABLE; that becomes
//! MASTER_PERSISTENCE_TIMEOUT (the message was not stored by a leader: send again, which the
//! clients do on another endpoint), as the proxy answers a write its master did not persist.

use raftmq_common::protocol::ResponseCode;

use crate::pb::Code;
use crate::pb::Status;

/// A status with `code` and `message`.
pub fn status(code: Code, message: impl Into<String>) -> Status {
    Status { code: code as i32, message: message.into() }
}

/// The OK status.
pub fn ok() -> Status {
    status(Code::Ok, "OK")
}

/// The proto code of a remoting response code.
pub fn code_of(response: ResponseCode) -> Code {
    match response {
        ResponseCode::Success => Code::Ok,
        ResponseCode::SystemBusy | ResponseCode::FlowControl | ResponseCode::PollingFull => Code::TooManyRequests,
        ResponseCode::RequestCodeNotSupported => Code::NotImplemented,
        ResponseCode::TopicNotExist => Code::TopicNotFound,
        ResponseCode::SubscriptionGroupNotExist => Code::ConsumerGroupNotFound,
        ResponseCode::NoPermission => Code::Forbidden,
        ResponseCode::MessageIllegal => Code::BadRequest,
        ResponseCode::InvalidParameter => Code::BadRequest,
        ResponseCode::FlushDiskTimeout | ResponseCode::ServiceNotAvailable => Code::MasterPersistenceTimeout,
        ResponseCode::FlushSlaveTimeout => Code::SlavePersistenceTimeout,
        ResponseCode::SlaveNotAvailable => Code::HaNotAvailable,
        ResponseCode::VersionNotSupported => Code::VersionUnsupported,
        ResponseCode::NoMessage | ResponseCode::PullNotFound => Code::Ok,
        _ => Code::InternalServerError,
    }
}

/// The status of a remoting response: its code mapped, its remark as the message.
pub fn of_remoting(response: ResponseCode, remark: Option<&str>) -> Status {
    let code = code_of(response);
    let message = match remark {
        Some(r) if !r.trim().is_empty() => r.trim().to_owned(),
        _ => format!("{response:?}"),
    };
    status(code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_answers_map_as_the_proxy_maps_them() {
        let table = [
            (ResponseCode::Success, Code::Ok),
            (ResponseCode::TopicNotExist, Code::TopicNotFound),
            (ResponseCode::SystemBusy, Code::TooManyRequests),
            (ResponseCode::NoPermission, Code::Forbidden),
            (ResponseCode::ServiceNotAvailable, Code::MasterPersistenceTimeout),
            (ResponseCode::FlushSlaveTimeout, Code::SlavePersistenceTimeout),
            (ResponseCode::SlaveNotAvailable, Code::HaNotAvailable),
            (ResponseCode::RequestCodeNotSupported, Code::NotImplemented),
            (ResponseCode::SystemError, Code::InternalServerError),
        ];
        for (response, code) in table {
            assert_eq!(code_of(response), code, "{response:?}");
        }
    }

    #[test]
    fn the_remark_is_the_message_and_a_blank_one_names_the_code() {
        let s = of_remoting(ResponseCode::TopicNotExist, Some(" topic[t] not exist "));
        assert_eq!((s.code, s.message.as_str()), (Code::TopicNotFound as i32, "topic[t] not exist"));
        let s = of_remoting(ResponseCode::SystemBusy, None);
        assert_eq!(s.message, "SystemBusy");
    }
}
