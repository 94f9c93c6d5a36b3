//! Generates the `apache.rocketmq.v2` MessagingService server (no client) and its messages from
//! the vendored protos in `proto/` (apache/rocketmq-apis, tag in `proto/README.md`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(false)
        .compile_protos(&["proto/apache/rocketmq/v2/service.proto"], &["proto"])?;
    Ok(())
}
