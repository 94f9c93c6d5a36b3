//! The generated `apache.rocketmq.v2` messages, MessagingService server and transport-less client
//! (tonic-prost-build over the vendored protos; see `build.rs`). Nothing here is written by hand.

#![allow(clippy::all, clippy::pedantic, missing_docs, unreachable_pub)]

tonic::include_proto!("apache.rocketmq.v2");
