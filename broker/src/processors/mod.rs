//! The remoting request handlers, one file per request family, each given its family's handles
//! ([`send_handles`] for the processors that store messages), and [`router`], which owns the
//! context, builds the handles and dispatches each request code to its handler.
//!
//! Handlers return `Result<response, refusal>` where both are the response frame: boxing the
//! refusal would only add an allocation to every refused request.

#[allow(clippy::result_large_err)]
pub mod acl;
#[allow(clippy::result_large_err)]
pub mod admin;
pub mod bridge;
#[allow(clippy::result_large_err)]
pub mod client_manage;
#[allow(clippy::result_large_err)]
pub mod end_transaction;
pub mod offset_reset;
#[allow(clippy::result_large_err)]
pub mod pop;
pub mod pull;
#[allow(clippy::result_large_err)]
pub mod query;
pub mod refusal;
pub mod reply;
pub mod router;
#[allow(clippy::result_large_err)]
pub mod send;
#[allow(clippy::result_large_err)]
pub mod send_back;
pub mod send_handles;
