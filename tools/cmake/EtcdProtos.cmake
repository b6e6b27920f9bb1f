# etcd's v3 API for the shared mode: C++ messages and gRPC stubs generated
# from the protos Debian ships with etcd (golang-etcd-server-dev), compiled
# against Debian's gRPC and protobuf.
#
# The protos are copied into the build tree without their gogoproto and
# google.api.http options (and the imports of those): options change no
# byte on the wire, and dropping them keeps gogo.proto and
# google/api/{annotations,http}.proto out of the process's protobuf
# descriptor pool, where a program that links Google's API protos itself
# would meet them twice (protobuf aborts on a file registered twice).
#
# Defines claimstore_etcdpb, an object library of the generated code
# (rpc.proto's KV, Watch, Lease, Cluster, Maintenance and Auth services;
# kv.proto; auth.proto) that the claimstore library takes in, and
# CLAIMSTORE_ETCDPB_INCLUDE, where its headers are
# ("etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h").

find_package(PkgConfig REQUIRED)
pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET GLOBAL grpc++)
pkg_check_modules(PROTOBUF REQUIRED IMPORTED_TARGET GLOBAL protobuf)
find_program(CLAIMSTORE_PROTOC protoc REQUIRED)
find_program(CLAIMSTORE_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

set(CLAIMSTORE_ETCD_PROTO_ROOT "/usr/share/gocode/src/go.etcd.io" CACHE PATH
    "Where etcd's protos are (etcd/etcdserver/etcdserverpb/rpc.proto below it; Debian: golang-etcd-server-dev)")

set(_etcd_protos
  etcd/etcdserver/etcdserverpb/rpc.proto
  etcd/mvcc/mvccpb/kv.proto
  etcd/auth/authpb/auth.proto)
set(_etcd_out "${PROJECT_BINARY_DIR}/etcdpb")
set(_etcd_srcs "")
set(_etcd_copies "")
foreach(proto IN LISTS _etcd_protos)
  set(_in "${CLAIMSTORE_ETCD_PROTO_ROOT}/${proto}")
  if(NOT EXISTS "${_in}")
    message(FATAL_ERROR "etcd's protos are missing: ${_in} (tools/deps.sh installs golang-etcd-server-dev)")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_in}")
  file(READ "${_in}" _text)
  string(REGEX REPLACE "import \"gogoproto/gogo.proto\";" "" _text "${_text}")
  string(REGEX REPLACE "import \"google/api/annotations.proto\";" "" _text "${_text}")
  string(REGEX REPLACE "option \\(gogoproto\\.[a-z_]+\\) = [a-z]+;" "" _text "${_text}")
  # (an http option may nest additional_bindings { ... } once)
  string(REGEX REPLACE "additional_bindings {[^}]*}" "" _text "${_text}")
  string(REGEX REPLACE "option \\(google\\.api\\.http\\) = {[^}]*};" "" _text "${_text}")
  if(_text MATCHES "gogoproto|google\\.api")
    message(FATAL_ERROR "${_in}: options of a form EtcdProtos.cmake does not strip")
  endif()
  file(CONFIGURE OUTPUT "${_etcd_out}/proto/${proto}" CONTENT "${_text}" @ONLY)
  list(APPEND _etcd_copies "${_etcd_out}/proto/${proto}")
  string(REGEX REPLACE "\\.proto$" "" _base "${proto}")
  list(APPEND _etcd_srcs "${_etcd_out}/${_base}.pb.cc" "${_etcd_out}/${_base}.grpc.pb.cc")
endforeach()

add_custom_command(
  OUTPUT ${_etcd_srcs}
  COMMAND ${CLAIMSTORE_PROTOC} -I "${_etcd_out}/proto" --cpp_out "${_etcd_out}"
          --grpc_out "${_etcd_out}" --plugin=protoc-gen-grpc=${CLAIMSTORE_GRPC_CPP_PLUGIN}
          ${_etcd_protos}
  DEPENDS ${_etcd_copies}
  WORKING_DIRECTORY "${_etcd_out}/proto"
  COMMENT "Generating etcd's v3 API (C++ and gRPC)"
  VERBATIM)

add_library(claimstore_etcdpb OBJECT ${_etcd_srcs})
# Generated code, protoc's and not ours: no warnings, and no sanitizer
# instrumentation (it took 4 of the asan-ubsan build's CPU minutes; it runs
# uninstrumented like Debian's libprotobuf and libgrpc++ it calls into).
target_compile_options(claimstore_etcdpb PRIVATE -w -fno-sanitize=all)
target_include_directories(claimstore_etcdpb SYSTEM PUBLIC "${_etcd_out}")
target_link_libraries(claimstore_etcdpb PUBLIC PkgConfig::GRPCPP PkgConfig::PROTOBUF)
set_target_properties(claimstore_etcdpb PROPERTIES POSITION_INDEPENDENT_CODE ON)
set(CLAIMSTORE_ETCDPB_INCLUDE "${_etcd_out}")
