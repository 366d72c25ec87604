//! Generates the gRPC code from `strom/**/*.proto` with protox (a pure-Rust protobuf
//! compiler), so a fresh machine needs no `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // compile_fds emits no rerun-if-changed lines for the .proto files themselves.
    println!("cargo:rerun-if-changed=strom");
    let files = [
        "strom/raft/v1/raft.proto",
        "strom/controller/v1/controller.proto",
        "strom/replication/v1/replication.proto",
        "strom/admin/v1/admin.proto",
    ];
    let fds = protox::compile(files, ["."])?;
    tonic_prost_build::configure()
        .bytes(".")
        // The CLI prints admin answers as JSON (`--output json`).
        .type_attribute(".strom.admin.v1", "#[derive(serde::Serialize)]")
        .compile_fds(fds)?;
    Ok(())
}
