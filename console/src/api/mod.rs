//! The console's JSON API under `/console/api/`, one file per page, polled by the page:
//!
//! ```text
//! GET  session  POST login, logout                       (this file)
//! GET  cluster  POST brokers/{g}/transfer-leader, brokers/{g}/nodes  DELETE brokers/{g}/nodes/{id}   cluster.rs
//! GET, POST topics  GET, PUT, DELETE topics/{t}                                                      topics.rs
//! GET consumer-groups[/{g}]  DELETE  POST {g}/reset-offset, {g}/clone-offsets  GET {g}/dlq  POST {g}/dlq/resend  consumer_groups.rs
//! GET messages/{by-id,by-key,by-time,trace}                                                          messages.rs
//! GET backlog                                                                                        backlog.rs
//! ```
//!
//! Every call passes `gate.rs` first (Host/Origin, JSON bodies, the session when a token is set).

pub mod backlog;
pub mod cluster;
pub mod consumer_groups;
pub mod error;
pub mod message_view;
pub mod messages;
pub mod topics;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::http::header::SET_COOKIE;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::delete;
use axum::routing::get;
use axum::routing::post;
use raftmq_broker::http::error::ApiJson;
use serde::Deserialize;
use serde_json::json;

use crate::api::error::ApiError;
use crate::state::ConsoleState;

/// Every route of the JSON API.
pub fn routes() -> Router<Arc<ConsoleState>> {
    Router::new()
        .route("/console/api/session", get(session))
        .route("/console/api/login", post(login))
        .route("/console/api/logout", post(logout))
        .route("/console/api/cluster", get(cluster::cluster))
        .route("/console/api/brokers/{group}/transfer-leader", post(cluster::transfer_leader))
        .route("/console/api/brokers/{group}/nodes", post(cluster::add_node))
        .route("/console/api/brokers/{group}/nodes/{id}", delete(cluster::remove_node))
        .route("/console/api/topics", get(topics::list).post(topics::create))
        .route("/console/api/topics/{topic}", get(topics::get_one).put(topics::update).delete(topics::delete))
        .route("/console/api/consumer-groups", get(consumer_groups::list))
        .route("/console/api/consumer-groups/{group}", get(consumer_groups::get_one).delete(consumer_groups::delete))
        .route("/console/api/consumer-groups/{group}/reset-offset", post(consumer_groups::reset_offset))
        .route("/console/api/consumer-groups/{group}/clone-offsets", post(consumer_groups::clone_offsets))
        .route("/console/api/consumer-groups/{group}/dlq", get(consumer_groups::dlq))
        .route("/console/api/consumer-groups/{group}/dlq/resend", post(consumer_groups::resend))
        .route("/console/api/messages/by-id", get(messages::by_id))
        .route("/console/api/messages/by-key", get(messages::by_key))
        .route("/console/api/messages/by-time", get(messages::by_time))
        .route("/console/api/messages/trace", get(messages::trace))
        .route("/console/api/backlog", get(backlog::backlog))
}

/// `GET /console/api/session`: whether a login is needed and whether this browser has one.
async fn session(State(s): State<Arc<ConsoleState>>, headers: HeaderMap) -> Json<serde_json::Value> {
    let required = s.config.token.is_some();
    Json(json!({
        "login_required": required,
        "logged_in": !required || s.sessions.valid(&headers),
        "namesrv_addr": s.config.namesrv_addr,
    }))
}

/// Body of a login.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    token: String,
}

/// `POST /console/api/login {"token"}`: a session cookie for the right token.
async fn login(State(s): State<Arc<ConsoleState>>, ApiJson(body): ApiJson<Login>) -> Response {
    let Some(token) = &s.config.token else {
        return Json(json!({ "logged_in": true })).into_response();
    };
    match s.sessions.login(token, &body.token) {
        Some(cookie) => with_cookie(Json(json!({ "logged_in": true })).into_response(), &cookie),
        None => ApiError::new(StatusCode::UNAUTHORIZED, "wrong token").into_response(),
    }
}

/// `POST /console/api/logout`.
async fn logout(State(s): State<Arc<ConsoleState>>, headers: HeaderMap) -> Response {
    let cookie = s.sessions.logout(&headers);
    with_cookie(Json(json!({ "logged_in": false })).into_response(), &cookie)
}

fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(cookie) {
        response.headers_mut().insert(SET_COOKIE, v);
    }
    response
}
