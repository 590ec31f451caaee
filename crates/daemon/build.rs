//! Compiles `proto/cuzk/v1/proving.proto` with protox (a protobuf compiler in
//! Rust), so building needs no `protoc` on the machine; tonic-prost-build then
//! writes the messages and the client and server code into OUT_DIR.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/cuzk/v1/proving.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .codec_path("crate::codec::Codec")
        .compile_fds(descriptors)?;
    Ok(())
}
