#!/bin/sh
# Regenerates Sources/IMProto/LeanCloudRealtime.pb.swift from proto/leancloud_realtime.proto.
#
# Needs protoc (apt-get install protobuf-compiler) and protoc-gen-swift from apple/swift-protobuf at the
# version Package.swift resolves (1.39.0), e.g.:
#   git clone https://github.com/apple/swift-protobuf.git /tmp/swift-protobuf
#   (cd /tmp/swift-protobuf && git checkout 1.39.0 && swift build -c release --product protoc-gen-swift)
#   PROTOC_GEN_SWIFT=/tmp/swift-protobuf/.build/release/protoc-gen-swift scripts/generate-proto.sh
# The generated file is committed; builds and CI never run this script.
set -eu
cd "$(dirname "$0")/.."
plugin="${PROTOC_GEN_SWIFT:-$(command -v protoc-gen-swift || true)}"
if [ -z "$plugin" ] || [ ! -x "$plugin" ]; then
    echo "protoc-gen-swift not found: set PROTOC_GEN_SWIFT or put it on PATH" >&2
    exit 1
fi
protoc --plugin=protoc-gen-swift="$plugin" \
    --proto_path=proto \
    --swift_opt=Visibility=Public \
    --swift_opt=FileNaming=DropPath \
    --swift_out=Sources/IMProto \
    proto/leancloud_realtime.proto
mv Sources/IMProto/leancloud_realtime.pb.swift Sources/IMProto/LeanCloudRealtime.pb.swift
echo "wrote Sources/IMProto/LeanCloudRealtime.pb.swift"
