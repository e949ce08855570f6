//! [`Representation`]: how the server is asked to write the objects it answers with, through the
//! request's `Accept` header.
//!
//! kube-apiserver can answer a list, a watch or a get with the objects themselves, or with each
//! object reduced to its metadata (`PartialObjectMetadata` of `meta.k8s.io/v1`), which is what
//! client-go's metadata client and kube-rs's `metadata_watcher` ask for. The choice is a media-type
//! parameter, `as=<Kind>;g=<group>;v=<version>`, and the header lists plain `application/json`
//! after it: a server that does not know the representation (an old or aggregated API server)
//! then answers with whole objects instead of `406 Not Acceptable`, and the caller decodes only
//! what it needs of them.

/// How the objects of a response are written: chosen per object type by the reflector's `Decode`
/// trait, sent as the `Accept` header of lists, watches and gets.
///
/// ```
/// use reflector::Representation;
/// let meta = Representation::PartialObjectMetadata;
/// assert_eq!(
///     meta.list_accept(),
///     "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
/// );
/// assert_eq!(meta.list_type(), Some(("meta.k8s.io/v1", "PartialObjectMetadataList")));
/// assert_eq!(Representation::Object.object_accept(), "application/json");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Representation {
    /// The objects as they are (`Accept: application/json`).
    #[default]
    Object,
    /// Each object reduced to its type meta and metadata, as `PartialObjectMetadata` of
    /// `meta.k8s.io/v1` (lists as `PartialObjectMetadataList`); whole objects from a server that
    /// does not know it.
    PartialObjectMetadata,
}

impl Representation {
    /// The `Accept` header of a list.
    pub const fn list_accept(self) -> &'static str {
        match self {
            Representation::Object => "application/json",
            Representation::PartialObjectMetadata => {
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            }
        }
    }

    /// The `Accept` header of a watch (each event carries one object) or of a get of one object.
    pub const fn object_accept(self) -> &'static str {
        match self {
            Representation::Object => "application/json",
            Representation::PartialObjectMetadata => {
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
            }
        }
    }

    /// The `Accept` header of a list (or a get) in Kubernetes' protobuf encoding, JSON listed
    /// after it (the answer's `Content-Type` decides how it is read). For the metadata
    /// representation, what client-go's metadata client sends: protobuf, then JSON, each asking
    /// for it, then plain JSON for a server that does not know it.
    pub const fn protobuf_list_accept(self) -> &'static str {
        match self {
            Representation::Object => "application/vnd.kubernetes.protobuf, application/json",
            Representation::PartialObjectMetadata => {
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,\
                 application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            }
        }
    }

    /// The `Accept` header of a get of one object in protobuf, JSON listed after it.
    pub const fn protobuf_object_accept(self) -> &'static str {
        match self {
            Representation::Object => "application/vnd.kubernetes.protobuf, application/json",
            Representation::PartialObjectMetadata => {
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,\
                 application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
            }
        }
    }

    /// The `Accept` header of a watch in protobuf (answered `…;stream=watch`: length-prefixed
    /// frames), JSON listed after it.
    pub const fn protobuf_watch_accept(self) -> &'static str {
        match self {
            Representation::Object => {
                "application/vnd.kubernetes.protobuf;stream=watch, application/json"
            }
            Representation::PartialObjectMetadata => self.protobuf_object_accept(),
        }
    }

    /// `(apiVersion, kind)` of the objects, when the representation has its own (otherwise they
    /// are the resource's).
    pub const fn object_type(self) -> Option<(&'static str, &'static str)> {
        match self {
            Representation::Object => None,
            Representation::PartialObjectMetadata => {
                Some(("meta.k8s.io/v1", "PartialObjectMetadata"))
            }
        }
    }

    /// `(apiVersion, kind)` of a list, when the representation has its own (otherwise the
    /// resource's `<Kind>List`).
    pub const fn list_type(self) -> Option<(&'static str, &'static str)> {
        match self {
            Representation::Object => None,
            Representation::PartialObjectMetadata => {
                Some(("meta.k8s.io/v1", "PartialObjectMetadataList"))
            }
        }
    }
}
