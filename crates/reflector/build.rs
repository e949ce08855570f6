//! With the `protobuf-json` feature, compiles Kubernetes' vendored `.proto` files (under
//! `proto/k8s.io/`, see its README) into one `FileDescriptorSet` that
//! `reflector::protobuf::transcode` loads with `prost-reflect`: the wire layout of every built-in
//! kind then comes from Kubernetes' own definitions, not from hand-written structs.
//!
//! `protox` is a pure-Rust protobuf compiler (no `protoc` binary to install), maintained
//! alongside `prost-reflect` and widely used by tonic/prost users. Without the feature this script
//! does nothing.

fn main() {
    #[cfg(feature = "protobuf-json")]
    descriptors::compile();
    #[cfg(feature = "k8s-pb")]
    views::generate();
}

#[cfg(feature = "protobuf-json")]
mod descriptors {
    use std::path::{Path, PathBuf};

    /// Every `generated.proto` under `proto/k8s.io/api`: the built-in API groups. Their imports
    /// (apimachinery's meta, runtime, intstr and resource) are found through the include path.
    fn api_files(root: &Path) -> Vec<String> {
        let mut files = Vec::new();
        let mut dirs = vec![root.join("k8s.io/api")];
        while let Some(dir) = dirs.pop() {
            let entries = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
            for entry in entries {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "proto") {
                    let rel = path.strip_prefix(root).expect("under the include root");
                    files.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        // A stable order: the descriptor set is then the same bytes on every build.
        files.sort();
        files
    }

    /// Every built-in API file and its imports, compiled.
    pub fn compiler() -> protox::Compiler {
        let root = PathBuf::from("proto");
        println!("cargo:rerun-if-changed=proto");
        let files = api_files(&root);
        let mut compiler = protox::Compiler::new([&root]).expect("the proto include path exists");
        compiler.include_imports(true);
        compiler.include_source_info(false);
        compiler
            .open_files(&files)
            .unwrap_or_else(|e| panic!("Kubernetes' .proto files compile: {e}"));
        compiler
    }

    pub fn compile() {
        let compiler = compiler();
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        std::fs::write(
            out.join("k8s_descriptors.bin"),
            compiler.encode_file_descriptor_set(),
        )
        .expect("OUT_DIR is writable");
    }
}

/// With the `k8s-pb` feature, writes `k8s_views.rs` into `OUT_DIR`: for every message of the
/// compiled descriptors, a typed view (`reflector::protobuf::view`) whose accessors read the
/// message's bytes in place, its layout (a `Schema`, which the views' validation walks), and
/// `HasView` for the `k8s_pb` type of the same name. A view is named and placed as its `k8s_pb` type
/// (the message's own name), and an accessor as prost names the field (`heck`'s snake case).
#[cfg(feature = "k8s-pb")]
mod views {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    use std::path::PathBuf;

    use heck::{ToSnakeCase, ToUpperCamelCase};
    use protox::prost_reflect::{Cardinality, FieldDescriptor, Kind, MessageDescriptor};

    /// Names k8s-pb 0.9 keeps as Kubernetes writes them, where prost would write `CsiDriver`.
    const K8S_PB_KEEPS: &[&str] = &[
        "APIGroupDiscovery",
        "APIGroupDiscoveryList",
        "APIResourceDiscovery",
        "APISubresourceDiscovery",
        "APIVersionDiscovery",
        "CSIDriver",
        "CSIDriverList",
        "CSIDriverSpec",
        "CSINode",
        "CSINodeDriver",
        "CSINodeList",
        "CSINodeSpec",
        "CSIPersistentVolumeSource",
        "CSIStorageCapacity",
        "CSIStorageCapacityList",
        "CSIVolumeSource",
        "DownwardAPIProjection",
        "DownwardAPIVolumeFile",
        "DownwardAPIVolumeSource",
        "IPAddress",
        "IPAddressList",
        "IPAddressSpec",
        "ServiceCIDR",
        "ServiceCIDRList",
        "ServiceCIDRSpec",
        "ServiceCIDRStatus",
    ];

    /// Messages of the vendored `.proto` files (a newer Kubernetes) that k8s-pb 0.9 does not have,
    /// by module: their views exist, without a `HasView` (no `k8s_pb` type to hang it on).
    const K8S_PB_LACKS: &[(&str, &[&str])] = &[
        (
            "api::admissionregistration::v1",
            &[
                "ApplyConfiguration",
                "JsonPatch",
                "MutatingAdmissionPolicy",
                "MutatingAdmissionPolicyBinding",
                "MutatingAdmissionPolicyBindingList",
                "MutatingAdmissionPolicyBindingSpec",
                "MutatingAdmissionPolicyList",
                "MutatingAdmissionPolicySpec",
                "Mutation",
            ],
        ),
        ("api::authentication::v1", &["AttestationValue"]),
        ("api::batch::v1", &["JobSchedulingConfiguration"]),
        (
            "api::certificates::v1",
            &[
                "ClusterTrustBundle",
                "ClusterTrustBundleList",
                "ClusterTrustBundleSpec",
                "PodCertificateRequest",
                "PodCertificateRequestList",
                "PodCertificateRequestSpec",
                "PodCertificateRequestStatus",
            ],
        ),
        (
            "api::core::v1",
            &[
                "EvictionResponder",
                "ImageVolumeStatus",
                "NodeAllocatableMappedResources",
                "NodeAllocatableOverheadResources",
                "NodeAllocatableResourceClaimStatus",
                "NodePodPreemptionPolicy",
                "PodSchedulingGroup",
                "PodVolumeHealth",
                "VolumeHealthCondition",
                "VolumeHealthStatus",
                "VolumeStatus",
            ],
        ),
        (
            "api::lifecycle::v1alpha1",
            &[
                "Eviction",
                "EvictionList",
                "EvictionPodReference",
                "EvictionRequest",
                "EvictionRequestList",
                "EvictionRequestPodReference",
                "EvictionRequestSpec",
                "EvictionRequestStatus",
                "EvictionRequestTarget",
                "EvictionSpec",
                "EvictionStatus",
                "EvictionTarget",
                "Requester",
                "ResponderStatus",
                "TargetResponder",
            ],
        ),
        (
            "api::resource::v1",
            &[
                "DeviceTaintRule",
                "DeviceTaintRuleList",
                "DeviceTaintRuleSpec",
                "DeviceTaintRuleStatus",
                "DeviceTaintSelector",
                "NodeAllocatableMapping",
                "NodeAllocatableOverhead",
                "NodeAllocatableResource",
            ],
        ),
        (
            "api::resource::v1alpha3",
            &[
                "PartitionTypeStatus",
                "PoolStatus",
                "ResourcePoolStatusRequest",
                "ResourcePoolStatusRequestList",
                "ResourcePoolStatusRequestSpec",
                "ResourcePoolStatusRequestStatus",
                "ShareableCapacityStatus",
                "ShareableSummaryStatus",
            ],
        ),
        (
            "api::resource::v1beta1",
            &[
                "NodeAllocatableMapping",
                "NodeAllocatableOverhead",
                "NodeAllocatableResource",
            ],
        ),
        (
            "api::resource::v1beta2",
            &[
                "DeviceTaintRule",
                "DeviceTaintRuleList",
                "DeviceTaintRuleSpec",
                "DeviceTaintRuleStatus",
                "DeviceTaintSelector",
                "NodeAllocatableMapping",
                "NodeAllocatableOverhead",
                "NodeAllocatableResource",
            ],
        ),
        (
            "api::scheduling::v1alpha3",
            &[
                "AllCompositeDisruptionMode",
                "AllDisruptionMode",
                "BasicSchedulingPolicy",
                "CompositeBasicSchedulingPolicy",
                "CompositeDisruptionMode",
                "CompositeGangSchedulingPolicy",
                "CompositePodGroup",
                "CompositePodGroupList",
                "CompositePodGroupSchedulingConstraints",
                "CompositePodGroupSchedulingPolicy",
                "CompositePodGroupSpec",
                "CompositePodGroupStatus",
                "CompositePodGroupTemplate",
                "DisruptionMode",
                "GangSchedulingPolicy",
                "PodGroup",
                "PodGroupList",
                "PodGroupResourceClaim",
                "PodGroupResourceClaimStatus",
                "PodGroupSchedulingConstraints",
                "PodGroupSchedulingPolicy",
                "PodGroupSpec",
                "PodGroupStatus",
                "PodGroupTemplate",
                "SingleCompositeDisruptionMode",
                "SingleDisruptionMode",
                "TopologyConstraint",
                "TypedLocalObjectReference",
                "Workload",
                "WorkloadCompositePodGroupAllDisruptionMode",
                "WorkloadCompositePodGroupBasicSchedulingPolicy",
                "WorkloadCompositePodGroupDisruptionMode",
                "WorkloadCompositePodGroupGangSchedulingPolicy",
                "WorkloadCompositePodGroupSchedulingConstraints",
                "WorkloadCompositePodGroupSchedulingPolicy",
                "WorkloadCompositePodGroupSingleDisruptionMode",
                "WorkloadList",
                "WorkloadPodGroupAllDisruptionMode",
                "WorkloadPodGroupBasicSchedulingPolicy",
                "WorkloadPodGroupDisruptionMode",
                "WorkloadPodGroupGangSchedulingPolicy",
                "WorkloadPodGroupResourceClaim",
                "WorkloadPodGroupSchedulingConstraints",
                "WorkloadPodGroupSchedulingPolicy",
                "WorkloadPodGroupSingleDisruptionMode",
                "WorkloadReference",
                "WorkloadSpec",
            ],
        ),
        (
            "api::scheduling::v1beta1",
            &[
                "AllCompositeDisruptionMode",
                "AllDisruptionMode",
                "BasicSchedulingPolicy",
                "CompositeBasicSchedulingPolicy",
                "CompositeDisruptionMode",
                "CompositeGangSchedulingPolicy",
                "CompositePodGroupSchedulingConstraints",
                "CompositePodGroupSchedulingPolicy",
                "CompositePodGroupTemplate",
                "DisruptionMode",
                "GangSchedulingPolicy",
                "PodGroup",
                "PodGroupList",
                "PodGroupResourceClaim",
                "PodGroupResourceClaimStatus",
                "PodGroupSchedulingConstraints",
                "PodGroupSchedulingPolicy",
                "PodGroupSpec",
                "PodGroupStatus",
                "PodGroupTemplate",
                "SingleCompositeDisruptionMode",
                "SingleDisruptionMode",
                "TopologyConstraint",
                "TypedLocalObjectReference",
                "Workload",
                "WorkloadList",
                "WorkloadReference",
                "WorkloadSpec",
            ],
        ),
        (
            "api::storage::v1",
            &["CsiNodeStatus", "StorageHealth", "StorageHealthCondition"],
        ),
        (
            "api::storage::v1beta1",
            &["CsiNodeStatus", "StorageHealth", "StorageHealthCondition"],
        ),
        (
            "api::storagemigration::v1",
            &[
                "StorageVersionMigration",
                "StorageVersionMigrationList",
                "StorageVersionMigrationSpec",
                "StorageVersionMigrationStatus",
            ],
        ),
        ("apimachinery::pkg::apis::meta::v1", &["ShardInfo"]),
    ];

    /// Where the generated modules sit in the crate.
    const ROOT: &str = "crate::wire::protobuf::view";

    /// Rust's keywords, which prost writes as raw identifiers (`r#type`), and the four that
    /// cannot be raw, which it suffixes with `_`.
    const KEYWORDS: &[&str] = &[
        "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do",
        "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in",
        "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
        "return", "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe",
        "unsized", "use", "virtual", "where", "while", "yield",
    ];

    /// The accessor of a field, named as k8s-pb names the field: heck's snake case, but for
    /// `IPs`, which k8s-pb writes `ips` (`pod_ips`) where heck would write `i_ps`.
    fn method_name(field: &str) -> String {
        let snake = field.replace("IPs", "Ips").to_snake_case();
        if ["self", "super", "crate", "Self"].contains(&snake.as_str()) {
            format!("{snake}_")
        } else if KEYWORDS.contains(&snake.as_str()) {
            format!("r#{snake}")
        } else {
            snake
        }
    }

    /// `k8s.io.api.core.v1` → `["api", "core", "v1"]`: the module path under `k8s_pb` and under
    /// the views.
    fn module_path(package: &str) -> Vec<String> {
        package
            .strip_prefix("k8s.io.")
            .unwrap_or_else(|| panic!("a Kubernetes package: {package}"))
            .split('.')
            .map(|s| s.to_snake_case())
            .collect()
    }

    /// The view type of a message, from anywhere in the crate.
    fn view_path(message: &MessageDescriptor) -> String {
        format!(
            "{ROOT}::{}::{}",
            module_path(message.package_name()).join("::"),
            message.name()
        )
    }

    /// The static holding a message's layout, from anywhere in the crate. Map entries, which
    /// have no view, are named after their parent.
    fn schema_path(message: &MessageDescriptor) -> String {
        format!(
            "{ROOT}::{}::{}",
            module_path(message.package_name()).join("::"),
            schema_name(message)
        )
    }

    /// The name of a message's `k8s_pb` type: prost's upper camel case for `k8s.io/api` but for
    /// the names k8s-pb keeps, the message's own name for apimachinery's.
    fn pb_name(message: &MessageDescriptor) -> String {
        if message.package_name().starts_with("k8s.io.api.")
            && !K8S_PB_KEEPS.contains(&message.name())
        {
            message.name().to_upper_camel_case()
        } else {
            message.name().to_string()
        }
    }

    fn schema_name(message: &MessageDescriptor) -> String {
        let parent = message.parent_message().map(|p| format!("{}_", p.name()));
        format!("{}{}_SCHEMA", parent.unwrap_or_default(), message.name()).to_uppercase()
    }

    /// The validation kind of a field (`crate::…::view::Kind`).
    fn kind_expr(kind: &Kind) -> String {
        match kind {
            Kind::Bool => "Kind::Bool".into(),
            Kind::Int32 => "Kind::Int32".into(),
            Kind::Int64 => "Kind::Int64".into(),
            Kind::String => "Kind::String".into(),
            Kind::Bytes => "Kind::Bytes".into(),
            Kind::Message(m) => format!("Kind::Message(&{})", schema_path(m)),
            other => panic!("a field kind Kubernetes' messages do not use: {other:?}"),
        }
    }

    /// The Rust type one value of `kind` is read as.
    fn value_type(kind: &Kind) -> String {
        match kind {
            Kind::Bool => "bool".into(),
            Kind::Int32 => "i32".into(),
            Kind::Int64 => "i64".into(),
            Kind::String => "&'a str".into(),
            Kind::Bytes => "&'a [u8]".into(),
            Kind::Message(m) => format!("{}<'a>", view_path(m)),
            other => panic!("a field kind Kubernetes' messages do not use: {other:?}"),
        }
    }

    fn schema(out: &mut String, message: &MessageDescriptor) {
        let mut fields: Vec<FieldDescriptor> = message.fields().collect();
        fields.sort_by_key(FieldDescriptor::number);
        assert!(
            fields.len() <= 256,
            "{} has more fields than a view tracks",
            message.full_name()
        );
        writeln!(
            out,
            "#[doc(hidden)]\npub(crate) static {}: Schema = Schema {{",
            schema_name(message)
        )
        .unwrap();
        writeln!(out, "    name: {:?},\n    fields: &[", message.name()).unwrap();
        for field in &fields {
            writeln!(
                out,
                "        FieldSchema {{ number: {}, name: {:?}, kind: {}, repeated: {} }},",
                field.number(),
                field.name(),
                kind_expr(&field.kind()),
                field.cardinality() == Cardinality::Repeated,
            )
            .unwrap();
        }
        let largest = fields.last().map_or(0, FieldDescriptor::number);
        assert!(
            largest < 4096,
            "{}: field numbers a table can index",
            message.full_name()
        );
        let mut by_number = vec![0usize; largest as usize + 1];
        for (i, field) in fields.iter().enumerate() {
            by_number[field.number() as usize] = i + 1;
        }
        let table: Vec<String> = by_number.iter().map(usize::to_string).collect();
        writeln!(out, "    ],\n    by_number: &[{}],\n}};", table.join(", ")).unwrap();
    }

    fn accessor(out: &mut String, field: &FieldDescriptor) {
        let name = method_name(field.name());
        let number = field.number();
        let kind = field.kind();
        let (doc, ty, body) = if field.is_map() {
            let Kind::Message(entry) = &kind else {
                unreachable!("a map's entries are messages")
            };
            let key = entry.map_entry_key_field();
            assert!(
                matches!(key.kind(), Kind::String),
                "{}: a map keyed by strings",
                field.full_name()
            );
            let value = value_type(&entry.map_entry_value_field().kind());
            (
                "map, keyed by strings",
                format!("Map<'a, {value}>"),
                format!("self.0.map({number})"),
            )
        } else if field.cardinality() == Cardinality::Repeated {
            let value = value_type(&kind);
            (
                "repeated",
                format!("Repeated<'a, {value}>"),
                format!("self.0.repeated({number})"),
            )
        } else {
            let value = value_type(&kind);
            (
                "optional",
                format!("Option<{value}>"),
                format!("self.0.get({number})"),
            )
        };
        writeln!(
            out,
            "    /// `{}` (field {number}, {doc}).\n    pub fn {name}(&self) -> {ty} {{\n        {body}\n    }}",
            field.name()
        )
        .unwrap();
    }

    fn view(out: &mut String, message: &MessageDescriptor) {
        assert!(
            message.child_messages().all(|m| m.is_map_entry()),
            "{}: Kubernetes' messages nest only map entries",
            message.full_name()
        );
        for entry in message.child_messages() {
            schema(out, &entry);
        }
        schema(out, message);
        let name = message.name();
        let pb = format!(
            "crate::store_index::k8s_pb::{}::{}",
            module_path(message.package_name()).join("::"),
            pb_name(message)
        );
        let module = module_path(message.package_name()).join("::");
        let in_k8s_pb = !K8S_PB_LACKS
            .iter()
            .any(|(m, names)| *m == module && names.contains(&pb_name(message).as_str()));
        let schema = schema_name(message);
        write!(
            out,
            "/// A view of `{full}`: its fields read in place from a validated message (see\n\
             /// [the module](crate::protobuf::view)).\n\
             #[derive(Clone, Copy)]\n\
             pub struct {name}<'a>(Fields<'a>);\n\n\
             impl<'a> View<'a> for {name}<'a> {{\n    \
                 fn schema() -> &'static Schema {{\n        &{schema}\n    }}\n    \
                 fn from_fields(fields: Fields<'a>) -> Self {{\n        {name}(fields)\n    }}\n    \
                 fn fields(&self) -> Fields<'a> {{\n        self.0\n    }}\n\
             }}\n\n\
             impl std::fmt::Debug for {name}<'_> {{\n    \
                 fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{\n        \
                     self.0.debug(&{schema}, f)\n    }}\n\
             }}\n\n",
            full = message.full_name(),
        )
        .unwrap();
        if in_k8s_pb {
            writeln!(
                out,
                "impl HasView for {pb} {{\n    type View<'a> = {name}<'a>;\n}}\n"
            )
            .unwrap();
        }
        let mut fields: Vec<FieldDescriptor> = message.fields().collect();
        fields.sort_by_key(FieldDescriptor::number);
        writeln!(out, "impl<'a> {name}<'a> {{").unwrap();
        for field in &fields {
            accessor(out, field);
        }
        writeln!(out, "}}\n").unwrap();
    }

    /// A tree of modules by package path, each holding its messages' generated code.
    #[derive(Default)]
    struct Module {
        package: Option<String>,
        code: String,
        children: BTreeMap<String, Module>,
    }

    fn write_module(out: &mut String, name: &str, module: &Module, path: &str) {
        let what = match &module.package {
            Some(package) => format!("Views of the messages of `{package}`."),
            None => format!("Views of the messages under `k8s.io.{path}`."),
        };
        writeln!(out, "/// {what}\npub mod {name} {{").unwrap();
        if !module.code.is_empty() {
            writeln!(
                out,
                "#[allow(unused_imports)]\nuse {ROOT}::{{Fields, FieldSchema, HasView, Kind, Map, Repeated, Schema, View}};\n"
            )
            .unwrap();
            out.push_str(&module.code);
        }
        for (child, sub) in &module.children {
            write_module(out, child, sub, &format!("{path}.{child}"));
        }
        writeln!(out, "}}").unwrap();
    }

    pub fn generate() {
        let pool = super::descriptors::compiler().descriptor_pool();
        let mut root = Module::default();
        let mut messages: Vec<MessageDescriptor> = pool
            .all_messages()
            .filter(|m| !m.is_map_entry() && m.package_name().starts_with("k8s.io."))
            .collect();
        messages.sort_by(|a, b| a.full_name().cmp(b.full_name()));
        for message in &messages {
            let mut module = &mut root;
            for segment in module_path(message.package_name()) {
                module = module.children.entry(segment).or_default();
            }
            module.package = Some(message.package_name().to_string());
            view(&mut module.code, message);
        }
        let mut out = String::from(
            "// Generated by build.rs from Kubernetes' .proto files: do not edit.\n\n",
        );
        for (name, module) in &root.children {
            write_module(&mut out, name, module, name);
        }
        let path = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        std::fs::write(path.join("k8s_views.rs"), out).expect("OUT_DIR is writable");
    }
}
