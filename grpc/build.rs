//! Generates the `apache.rocketmq.v2` MessagingService server, its client and its messages from
//! the vendored protos in `proto/` (apache/rocketmq-apis, tag in `proto/README.md`).
//!
//! The client is generated without transport (`build_transport(false)`: no `connect`), so this
//! crate keeps tonic's server features only; a user of the client (`raftmq bench grpc-send`) brings
//! a channel of its own (tonic's `channel` feature) and wraps it with `MessagingServiceClient::new`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        .compile_protos(&["proto/apache/rocketmq/v2/service.proto"], &["proto"])?;
    Ok(())
}
