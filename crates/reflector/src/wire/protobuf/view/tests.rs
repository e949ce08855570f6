//! The views against prost's decode of the same bytes (V1–V4 in `mod.rs`).

use bytes::Bytes;
use proptest::prelude::*;
use prost::Message as _;

use super::api::core::v1 as view;
use super::{validate, HasView, View};
use crate::store_index::k8s_pb::api::core::v1 as pb;
use crate::store_index::k8s_pb::apimachinery::pkg::api::resource::Quantity;
use crate::store_index::k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use crate::wire::protobuf::transcode;
use crate::wire::protobuf::wire::put_varint;

fn realistic_pod(i: usize) -> Vec<u8> {
    let json: serde_json::Value =
        serde_json::from_str(&sim_apiserver::fixtures::realistic_pod_json(i)).unwrap();
    transcode::encode_message_as("v1", "Pod", &json).unwrap()
}

/// Every accessor the comparison reads, as owned values: one kind of each (strings, integers of
/// both widths, booleans, messages, repeated messages, strings and integers, maps of strings and
/// of messages, keyword and `IPs` names).
#[derive(Debug, PartialEq)]
struct Read {
    name: Option<String>,
    namespace: Option<String>,
    generation: Option<i64>,
    created: Option<(Option<i64>, Option<i32>)>,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
    owners: Vec<(Option<String>, Option<bool>)>,
    finalizers: Vec<String>,
    node_name: Option<String>,
    grace: Option<i64>,
    service_links: Option<bool>,
    groups: Vec<i64>,
    containers: Vec<ContainerRead>,
    tolerations: Vec<(Option<String>, Option<String>, Option<i64>)>,
    default_modes: Vec<Option<i32>>,
    phase: Option<String>,
    conditions: Vec<(Option<String>, Option<String>)>,
    pod_ips: Vec<Option<String>>,
}

#[derive(Debug, PartialEq)]
struct ContainerRead {
    name: Option<String>,
    image: Option<String>,
    ports: Vec<(Option<i32>, Option<String>)>,
    env: Vec<(Option<String>, Option<String>)>,
    limits: Vec<(String, Option<String>)>,
    command: Vec<String>,
}

fn own(v: Option<&str>) -> Option<String> {
    v.map(str::to_string)
}

fn read_view(pod: view::Pod<'_>) -> Read {
    let meta = pod.metadata();
    let spec = pod.spec();
    let status = pod.status();
    // A map read in wire order, a later entry of a key replacing an earlier one, as prost reads
    // maps; compared in key order, as prost keeps them.
    let pairs = |m: super::Map<'_, &str>| {
        m.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect()
    };
    Read {
        name: own(meta.and_then(|m| m.name())),
        namespace: own(meta.and_then(|m| m.namespace())),
        generation: meta.and_then(|m| m.generation()),
        created: meta
            .and_then(|m| m.creation_timestamp())
            .map(|t| (t.seconds(), t.nanos())),
        labels: meta.map(|m| pairs(m.labels())).unwrap_or_default(),
        annotations: meta.map(|m| pairs(m.annotations())).unwrap_or_default(),
        owners: meta
            .map(|m| {
                m.owner_references()
                    .map(|o| (own(o.name()), o.controller()))
                    .collect()
            })
            .unwrap_or_default(),
        finalizers: meta
            .map(|m| m.finalizers().map(str::to_string).collect())
            .unwrap_or_default(),
        node_name: own(spec.and_then(|s| s.node_name())),
        grace: spec.and_then(|s| s.termination_grace_period_seconds()),
        service_links: spec.and_then(|s| s.enable_service_links()),
        groups: spec
            .and_then(|s| s.security_context())
            .map(|c| c.supplemental_groups().collect())
            .unwrap_or_default(),
        containers: spec
            .map(|s| {
                s.containers()
                    .map(|c| ContainerRead {
                        name: own(c.name()),
                        image: own(c.image()),
                        ports: c
                            .ports()
                            .map(|p| (p.container_port(), own(p.protocol())))
                            .collect(),
                        env: c.env().map(|e| (own(e.name()), own(e.value()))).collect(),
                        limits: c
                            .resources()
                            .map(|r| {
                                r.limits()
                                    .iter()
                                    .map(|(k, q)| (k.to_string(), own(q.string())))
                                    .collect::<std::collections::BTreeMap<_, _>>()
                                    .into_iter()
                                    .collect()
                            })
                            .unwrap_or_default(),
                        command: c.command().map(str::to_string).collect(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        tolerations: spec
            .map(|s| {
                s.tolerations()
                    .map(|t| (own(t.key()), own(t.effect()), t.toleration_seconds()))
                    .collect()
            })
            .unwrap_or_default(),
        default_modes: spec
            .map(|s| {
                s.volumes()
                    .map(|v| {
                        v.volume_source()
                            .and_then(|v| v.projected())
                            .and_then(|p| p.default_mode())
                    })
                    .collect()
            })
            .unwrap_or_default(),
        phase: own(status.and_then(|s| s.phase())),
        conditions: status
            .map(|s| {
                s.conditions()
                    .map(|c| (own(c.r#type()), own(c.status())))
                    .collect()
            })
            .unwrap_or_default(),
        pod_ips: status
            .map(|s| s.pod_ips().map(|ip| own(ip.ip())).collect())
            .unwrap_or_default(),
    }
}

fn read_prost(pod: &pb::Pod) -> Read {
    let meta = pod.metadata.as_ref();
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let pairs = |m: &std::collections::BTreeMap<String, String>| {
        m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    Read {
        name: meta.and_then(|m| m.name.clone()),
        namespace: meta.and_then(|m| m.namespace.clone()),
        generation: meta.and_then(|m| m.generation),
        created: meta
            .and_then(|m| m.creation_timestamp.as_ref())
            .map(|t| (t.seconds, t.nanos)),
        labels: meta.map(|m| pairs(&m.labels)).unwrap_or_default(),
        annotations: meta.map(|m| pairs(&m.annotations)).unwrap_or_default(),
        owners: meta
            .map(|m| {
                m.owner_references
                    .iter()
                    .map(|o| (o.name.clone(), o.controller))
                    .collect()
            })
            .unwrap_or_default(),
        finalizers: meta.map(|m| m.finalizers.clone()).unwrap_or_default(),
        node_name: spec.and_then(|s| s.node_name.clone()),
        grace: spec.and_then(|s| s.termination_grace_period_seconds),
        service_links: spec.and_then(|s| s.enable_service_links),
        groups: spec
            .and_then(|s| s.security_context.as_ref())
            .map(|c| c.supplemental_groups.clone())
            .unwrap_or_default(),
        containers: spec
            .map(|s| {
                s.containers
                    .iter()
                    .map(|c| ContainerRead {
                        name: c.name.clone(),
                        image: c.image.clone(),
                        ports: c
                            .ports
                            .iter()
                            .map(|p| (p.container_port, p.protocol.clone()))
                            .collect(),
                        env: c
                            .env
                            .iter()
                            .map(|e| (e.name.clone(), e.value.clone()))
                            .collect(),
                        limits: c
                            .resources
                            .as_ref()
                            .map(|r| {
                                r.limits
                                    .iter()
                                    .map(|(k, q)| (k.clone(), q.string.clone()))
                                    .collect()
                            })
                            .unwrap_or_default(),
                        command: c.command.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        tolerations: spec
            .map(|s| {
                s.tolerations
                    .iter()
                    .map(|t| (t.key.clone(), t.effect.clone(), t.toleration_seconds))
                    .collect()
            })
            .unwrap_or_default(),
        default_modes: spec
            .map(|s| {
                s.volumes
                    .iter()
                    .map(|v| {
                        v.volume_source
                            .as_ref()
                            .and_then(|v| v.projected.as_ref())
                            .and_then(|p| p.default_mode)
                    })
                    .collect()
            })
            .unwrap_or_default(),
        phase: status.and_then(|s| s.phase.clone()),
        conditions: status
            .map(|s| {
                s.conditions
                    .iter()
                    .map(|c| (c.r#type.clone(), c.status.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        pod_ips: status
            .map(|s| s.pod_ips.iter().map(|ip| ip.ip.clone()).collect())
            .unwrap_or_default(),
    }
}

#[test]
fn a_realistic_pod_reads_the_same_through_its_view_and_through_prost() {
    let bytes = realistic_pod(7);
    let pod = pb::Pod::decode(&bytes[..]).unwrap();
    let read = read_view(validate::<pb::Pod>(&bytes).unwrap());
    assert_eq!(read, read_prost(&pod));
    // The fixture reaches every kind of accessor the comparison has.
    assert_eq!(read.labels.len(), 4);
    assert_eq!(read.containers[0].ports.len(), 2);
    assert_eq!(read.containers[0].limits.len(), 2);
    assert_eq!(read.conditions.len(), 4);
    assert_eq!(read.pod_ips.len(), 1);
    assert_eq!(read.default_modes, [Some(420)]);
    assert!(read.created.is_some());
}

fn text() -> impl Strategy<Value = Option<String>> {
    prop::option::of("[a-z0-9./ é-]{0,12}")
}

prop_compose! {
    fn container()(
        name in text(),
        image in text(),
        ports in prop::collection::vec((prop::option::of(any::<i32>()), text()), 0..3),
        env in prop::collection::vec((text(), text()), 0..3),
        limits in prop::collection::btree_map("[a-z]{1,6}", text(), 0..3),
        command in prop::collection::vec("[a-z -]{0,8}", 0..3),
    ) -> pb::Container {
        pb::Container {
            name,
            image,
            ports: ports
                .into_iter()
                .map(|(container_port, protocol)| pb::ContainerPort {
                    container_port,
                    protocol,
                    ..Default::default()
                })
                .collect(),
            env: env
                .into_iter()
                .map(|(name, value)| pb::EnvVar { name, value, ..Default::default() })
                .collect(),
            resources: Some(pb::ResourceRequirements {
                limits: limits
                    .into_iter()
                    .map(|(k, string)| (k, Quantity { string }))
                    .collect(),
                ..Default::default()
            }),
            command,
            ..Default::default()
        }
    }
}

prop_compose! {
    fn pod()(
        name in text(),
        namespace in text(),
        generation in prop::option::of(any::<i64>()),
        created in prop::option::of((prop::option::of(any::<i64>()), prop::option::of(any::<i32>()))),
        labels in prop::collection::btree_map("[a-z/.]{0,8}", "[a-z0-9]{0,8}", 0..4),
        owners in prop::collection::vec((text(), prop::option::of(any::<bool>())), 0..3),
        finalizers in prop::collection::vec("[a-z./]{0,10}", 0..3),
        node_name in text(),
        grace in prop::option::of(any::<i64>()),
        service_links in prop::option::of(any::<bool>()),
        groups in prop::option::of(prop::collection::vec(any::<i64>(), 0..4)),
        containers in prop::collection::vec(container(), 0..3),
        phase in text(),
        conditions in prop::collection::vec((text(), text()), 0..4),
        pod_ips in prop::collection::vec(text(), 0..3),
    ) -> pb::Pod {
        pb::Pod {
            metadata: Some(meta::ObjectMeta {
                name,
                namespace,
                generation,
                creation_timestamp: created.map(|(seconds, nanos)| meta::Time { seconds, nanos }),
                labels,
                owner_references: owners
                    .into_iter()
                    .map(|(name, controller)| meta::OwnerReference { name, controller, ..Default::default() })
                    .collect(),
                finalizers,
                ..Default::default()
            }),
            spec: Some(pb::PodSpec {
                node_name,
                termination_grace_period_seconds: grace,
                enable_service_links: service_links,
                security_context: groups.map(|supplemental_groups| pb::PodSecurityContext {
                    supplemental_groups,
                    ..Default::default()
                }),
                containers,
                ..Default::default()
            }),
            status: Some(pb::PodStatus {
                phase,
                conditions: conditions
                    .into_iter()
                    .map(|(r#type, status)| pb::PodCondition { r#type, status, ..Default::default() })
                    .collect(),
                pod_ips: pod_ips.into_iter().map(|ip| pb::PodIp { ip }).collect(),
                ..Default::default()
            }),
        }
    }
}

/// `supplementalGroups` written packed (one length-delimited field), as a proto3 writer would.
fn with_packed_groups(pod: &pb::Pod) -> Vec<u8> {
    let mut without = pod.clone();
    let groups = without
        .spec
        .as_mut()
        .and_then(|s| s.security_context.as_mut())
        .map(|c| std::mem::take(&mut c.supplemental_groups))
        .unwrap_or_default();
    let mut context = without
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default()
        .encode_to_vec();
    let mut packed = Vec::new();
    for g in &groups {
        put_varint(&mut packed, *g as u64);
    }
    // supplementalGroups is field 4 of PodSecurityContext.
    crate::wire::protobuf::wire::put_bytes(&mut context, 4, &packed);
    let mut spec = without.spec.clone().unwrap_or_default();
    spec.security_context = None;
    let mut spec_bytes = spec.encode_to_vec();
    // securityContext is field 14 of PodSpec.
    crate::wire::protobuf::wire::put_bytes(&mut spec_bytes, 14, &context);
    let mut outer = pb::Pod {
        spec: None,
        ..without
    }
    .encode_to_vec();
    crate::wire::protobuf::wire::put_bytes(&mut outer, 2, &spec_bytes);
    outer
}

proptest! {
    /// V1–V4: a message prost writes validates, and every accessor reads what prost decodes.
    #[test]
    fn the_views_read_what_prost_decodes(pod in pod()) {
        let bytes = pod.encode_to_vec();
        let view = validate::<pb::Pod>(&bytes).unwrap();
        prop_assert_eq!(read_view(view), read_prost(&pod));
        // Packed integers read as the same values as unpacked ones.
        let packed = with_packed_groups(&pod);
        let prost_packed = pb::Pod::decode(&packed[..]).unwrap();
        prop_assert_eq!(read_view(validate::<pb::Pod>(&packed).unwrap()), read_prost(&prost_packed));
    }

    /// V1–V4 on damaged bytes: a message the views accept, prost decodes, and both read the
    /// same, unless it holds a field the views do not know (V4); a message prost refuses, the
    /// views refuse. (The views refuse more: V3.)
    #[test]
    fn damaged_messages_are_refused_or_read_as_prost_reads_them(
        i in 0usize..50,
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = realistic_pod(i);
        for (at, value) in flips {
            let at = at.index(bytes.len());
            bytes[at] = value;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len()));
        }
        let prost = pb::Pod::decode(&bytes[..]);
        match validate::<pb::Pod>(&bytes) {
            Ok(view) => {
                let _ = format!("{view:?}");
                match prost {
                    Ok(prost) => prop_assert_eq!(read_view(view), read_prost(&prost)),
                    // Only a field the views do not know (V4) may be one prost refuses.
                    Err(e) => prop_assert!(
                        super::unknown_fields::<pb::Pod>(&bytes).unwrap() > 0,
                        "the views accept what prost refuses: {}", e
                    ),
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

fn pod_with_spec_bytes(spec: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    crate::wire::protobuf::wire::put_bytes(&mut out, 2, spec);
    out
}

#[test]
fn a_singular_field_written_twice_is_refused_with_its_path() {
    // PodSpec.nodeName (field 10) twice.
    let mut spec = Vec::new();
    crate::wire::protobuf::wire::put_bytes(&mut spec, 10, b"a");
    crate::wire::protobuf::wire::put_bytes(&mut spec, 10, b"b");
    let err = validate::<pb::Pod>(&pod_with_spec_bytes(&spec)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid protobuf message at Pod.spec.nodeName: a singular field that appears twice"
    );
}

#[test]
fn a_wrong_wire_type_and_bad_utf8_are_refused_with_their_paths() {
    // nodeName as a varint.
    let mut spec = Vec::new();
    put_varint(&mut spec, 10 << 3); // wire type 0: a varint
    put_varint(&mut spec, 5);
    let err = validate::<pb::Pod>(&pod_with_spec_bytes(&spec)).unwrap_err();
    assert!(
        err.to_string().contains("Pod.spec.nodeName: a wire type"),
        "{err}"
    );

    let mut spec = Vec::new();
    crate::wire::protobuf::wire::put_bytes(&mut spec, 10, &[0xff, 0xfe]);
    let err = validate::<pb::Pod>(&pod_with_spec_bytes(&spec)).unwrap_err();
    assert!(
        err.to_string()
            .contains("Pod.spec.nodeName: a string that is not UTF-8"),
        "{err}"
    );

    // A length past the end of the message.
    let err = validate::<pb::Pod>(&[0x12, 0x05, 0x01]).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn unknown_fields_are_skipped_as_prost_skips_them() {
    let mut bytes = realistic_pod(1);
    // Field 99, a string, and field 98, a varint, as a newer server might add.
    crate::wire::protobuf::wire::put_bytes(&mut bytes, 99, b"from the future");
    put_varint(&mut bytes, 98 << 3);
    put_varint(&mut bytes, 1);
    let view = validate::<pb::Pod>(&bytes).unwrap();
    assert_eq!(
        read_view(view),
        read_prost(&pb::Pod::decode(&bytes[..]).unwrap())
    );
}

#[test]
fn maps_read_their_last_value_and_absent_parts_as_empty() {
    // ConfigMap.data (field 2) with "k" twice, then an entry with no value, and binaryData
    // (field 3) with bytes.
    let entry = |key: Option<&str>, value: Option<&[u8]>| {
        let mut e = Vec::new();
        if let Some(k) = key {
            crate::wire::protobuf::wire::put_bytes(&mut e, 1, k.as_bytes());
        }
        if let Some(v) = value {
            crate::wire::protobuf::wire::put_bytes(&mut e, 2, v);
        }
        e
    };
    let mut cm = Vec::new();
    for e in [
        entry(Some("k"), Some(b"first")),
        entry(Some("k"), Some(b"second")),
        entry(Some("empty"), None),
    ] {
        crate::wire::protobuf::wire::put_bytes(&mut cm, 2, &e);
    }
    crate::wire::protobuf::wire::put_bytes(&mut cm, 3, &entry(Some("bin"), Some(&[0, 159, 255])));
    let view = validate::<pb::ConfigMap>(&cm).unwrap();
    assert_eq!(view.data().get("k"), Some("second"));
    assert_eq!(view.data().get("empty"), Some(""));
    assert_eq!(view.data().get("missing"), None);
    assert_eq!(view.data().len(), 3);
    assert_eq!(view.binary_data().get("bin"), Some(&[0u8, 159, 255][..]));
    let prost = pb::ConfigMap::decode(&cm[..]).unwrap();
    assert_eq!(prost.data["k"], "second");
    assert_eq!(format!("{view:?}").matches("second").count(), 1);
}

#[test]
fn every_message_has_a_view_and_k8s_pb_types_name_theirs() {
    fn schema_of<T: HasView>() -> &'static super::Schema {
        <T::View<'static> as View<'static>>::schema()
    }
    assert_eq!(schema_of::<pb::Pod>().name(), "Pod");
    assert_eq!(schema_of::<pb::PodIp>().name(), "PodIP");
    assert_eq!(
        schema_of::<crate::store_index::k8s_pb::api::storage::v1::CSIDriver>().name(),
        "CSIDriver"
    );
    // A message k8s-pb does not have still has a view, validated by its own name.
    let bytes = Bytes::from_static(&[]);
    assert!(<super::api::core::v1::VolumeStatus<'_> as View<'_>>::validate(&bytes).is_ok());
}

#[test]
fn a_secret_view_shows_neither_its_data_nor_its_string_data() {
    let secret = pb::Secret {
        data: [("password".to_string(), b"hunter2".to_vec())].into(),
        string_data: [("token".to_string(), "s3cr3t".to_string())].into(),
        r#type: Some("Opaque".into()),
        ..Default::default()
    };
    let bytes = secret.encode_to_vec();
    let view = validate::<pb::Secret>(&bytes).unwrap();
    assert_eq!(view.data().get("password"), Some(&b"hunter2"[..]));
    let shown = format!("{view:?}");
    assert!(
        !shown.contains("hunter2") && !shown.contains("s3cr3t"),
        "{shown}"
    );
    assert!(
        !shown.contains("password") && !shown.contains("token"),
        "{shown}"
    );
    assert!(shown.contains("Opaque"), "{shown}");
    // Bytes elsewhere show their length only.
    let cm = pb::ConfigMap {
        binary_data: [("blob".to_string(), vec![1, 2, 3])].into(),
        ..Default::default()
    };
    let bytes = cm.encode_to_vec();
    let shown = format!("{:?}", validate::<pb::ConfigMap>(&bytes).unwrap());
    assert!(shown.contains("<3 bytes>"), "{shown}");
}

/// Found by the `bodies` fuzz target: a key whose field number is beyond protobuf's 2^29 - 1 (an
/// unknown field to the layout, but a key prost refuses) was accepted.
#[test]
fn a_field_number_beyond_protobufs_range_is_refused_as_prost_refuses_it() {
    let body = [0xa8, 0xff, 0xff, 0xfd, 0x28, 0xff, 0xdf, 0xff, 0xff, 0x0d];
    assert!(pb::Pod::decode(&body[..]).is_err());
    let err = validate::<pb::Pod>(&body).unwrap_err();
    assert!(
        err.to_string().contains("a field number out of range"),
        "{err}"
    );
    // The largest allowed number is an unknown field, skipped.
    let mut largest = Vec::new();
    put_varint(&mut largest, ((1u64 << 29) - 1) << 3); // wire type 0
    put_varint(&mut largest, 1);
    assert!(pb::Pod::decode(&largest[..]).is_ok());
    assert!(validate::<pb::Pod>(&largest).is_ok());
}

/// Found by the `bodies` fuzz target: a ten-byte varint whose last byte holds more than the 64th
/// bit was read, its high bits dropped, where prost refuses it.
#[test]
fn a_varint_beyond_64_bits_is_refused_as_prost_refuses_it() {
    // Field 51 (unknown to Pod), a varint of ten bytes ending in 0x69.
    let body = [
        0x98, 0x03, 0xb6, 0xf6, 0xfe, 0x98, 0xe9, 0xfe, 0xfb, 0xfd, 0x98, 0x69,
    ];
    assert!(pb::Pod::decode(&body[..]).is_err());
    let err = validate::<pb::Pod>(&body).unwrap_err();
    assert!(err.to_string().contains("beyond 64 bits"), "{err}");
    // u64::MAX, whose tenth byte is 1, is a varint both read.
    let mut max = Vec::new();
    put_varint(&mut max, 51 << 3);
    put_varint(&mut max, u64::MAX);
    assert!(pb::Pod::decode(&max[..]).is_ok());
    assert!(validate::<pb::Pod>(&max).is_ok());
}

/// Found by the `bodies` fuzz target: k8s-pb 0.9's `PodSpec` still has field 42 (a message,
/// since removed from Kubernetes), which the views skip as unknown and prost decodes by its old
/// type. The views accept the pod and count the field; prost refuses its damaged content.
#[test]
fn a_field_only_k8s_pb_knows_is_skipped_and_counted() {
    // spec { field 42: one zero byte }
    let body = [0x12, 0x04, 0xd2, 0x02, 0x01, 0x00];
    assert!(pb::Pod::decode(&body[..]).is_err());
    assert!(validate::<pb::Pod>(&body).is_ok());
    assert_eq!(super::unknown_fields::<pb::Pod>(&body).unwrap(), 1);
    assert_eq!(
        super::unknown_fields::<pb::Pod>(&realistic_pod(3)).unwrap(),
        0
    );
}
