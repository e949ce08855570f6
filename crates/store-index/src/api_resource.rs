//! [`ApiResource`]: a Rust type that knows where its objects live in the API (group, version,
//! kind, plural, scope), so that a client can address them from the type alone.
//!
//! It is implemented here for every `k8s_openapi` resource type (feature `k8s-openapi`, from the
//! type's own `k8s_openapi::Resource` facts) and for [`Pb<T>`](crate::Pb) of every `k8s_pb`
//! resource type (feature `k8s-pb`); the reflector adds its `PbView<T>`. A type of your own (a
//! custom resource) implements it with five constants. Objects whose type is known only at run
//! time (`DynamicObject`, `CompactObject`, `PartialObjectMetadata`) have no such type, and are
//! addressed by a value instead (the reflector's `Resource`).

/// A Rust type that knows where its objects live in the API.
///
/// ```
/// use store_index::ApiResource;
/// struct Widget;
/// impl ApiResource for Widget {
///     const GROUP: &'static str = "example.com";
///     const VERSION: &'static str = "v1";
///     const KIND: &'static str = "Widget";
///     const PLURAL: &'static str = "widgets";
///     const NAMESPACED: bool = true;
/// }
/// assert_eq!(Widget::PLURAL, "widgets");
/// ```
pub trait ApiResource {
    /// API group (`""` for the core group).
    const GROUP: &'static str;
    /// Version.
    const VERSION: &'static str;
    /// Kind.
    const KIND: &'static str;
    /// Plural resource name.
    const PLURAL: &'static str;
    /// Whether objects live in namespaces.
    const NAMESPACED: bool;
}

/// The scope types of `k8s_openapi` and `k8s_pb` (`NamespaceResourceScope`,
/// `ClusterResourceScope`) as a constant, so that [`ApiResource::NAMESPACED`] can be read from a
/// type's `Scope`. Subresource types (`SubResourceScope`) have no list of their own and no scope
/// here, so they are not `ApiResource`.
pub trait ResourceScope {
    /// Whether objects of this scope live in namespaces.
    const NAMESPACED: bool;
}

#[cfg(feature = "k8s-openapi")]
mod k8s_openapi_types {
    use super::{ApiResource, ResourceScope};

    impl ResourceScope for k8s_openapi::NamespaceResourceScope {
        const NAMESPACED: bool = true;
    }

    impl ResourceScope for k8s_openapi::ClusterResourceScope {
        const NAMESPACED: bool = false;
    }

    /// Every `k8s_openapi` resource type of a namespace or cluster scope.
    impl<T> ApiResource for T
    where
        T: k8s_openapi::Resource,
        T::Scope: ResourceScope,
    {
        const GROUP: &'static str = T::GROUP;
        const VERSION: &'static str = T::VERSION;
        const KIND: &'static str = T::KIND;
        const PLURAL: &'static str = T::URL_PATH_SEGMENT;
        const NAMESPACED: bool = <T::Scope as ResourceScope>::NAMESPACED;
    }
}

#[cfg(feature = "k8s-pb")]
mod k8s_pb_types {
    use super::{ApiResource, ResourceScope};
    use crate::Pb;

    impl ResourceScope for k8s_pb::NamespaceResourceScope {
        const NAMESPACED: bool = true;
    }

    impl ResourceScope for k8s_pb::ClusterResourceScope {
        const NAMESPACED: bool = false;
    }

    /// Every `k8s_pb` resource type of a namespace or cluster scope, in its [`Pb`] wrapper (the
    /// wrapper is what `Object` and the decoders are implemented for).
    impl<T> ApiResource for Pb<T>
    where
        T: k8s_pb::Resource,
        T::Scope: ResourceScope,
    {
        const GROUP: &'static str = T::GROUP;
        const VERSION: &'static str = T::VERSION;
        const KIND: &'static str = T::KIND;
        const PLURAL: &'static str = T::URL_PATH_SEGMENT;
        const NAMESPACED: bool = <T::Scope as ResourceScope>::NAMESPACED;
    }
}

#[cfg(test)]
mod tests {
    #[allow(unused_imports)]
    use super::ApiResource;

    #[cfg(feature = "k8s-openapi")]
    #[test]
    fn k8s_openapi_types_carry_their_own_address() {
        use k8s_openapi::api::apps::v1::Deployment;
        use k8s_openapi::api::core::v1::{Node, Pod};
        assert_eq!(
            (
                Pod::GROUP,
                Pod::VERSION,
                Pod::KIND,
                Pod::PLURAL,
                Pod::NAMESPACED
            ),
            ("", "v1", "Pod", "pods", true)
        );
        assert_eq!(
            (Deployment::GROUP, Deployment::PLURAL),
            ("apps", "deployments")
        );
        assert_eq!((Node::PLURAL, Node::NAMESPACED), ("nodes", false));
    }

    #[cfg(feature = "k8s-pb")]
    #[test]
    fn k8s_pb_types_carry_their_own_address_in_their_wrapper() {
        use crate::k8s_pb::api::core::v1::{Namespace, Pod};
        use crate::Pb;
        assert_eq!(
            (
                <Pb<Pod>>::GROUP,
                <Pb<Pod>>::VERSION,
                <Pb<Pod>>::KIND,
                <Pb<Pod>>::PLURAL,
                <Pb<Pod>>::NAMESPACED
            ),
            ("", "v1", "Pod", "pods", true)
        );
        assert_eq!(
            (<Pb<Namespace>>::PLURAL, <Pb<Namespace>>::NAMESPACED),
            ("namespaces", false)
        );
    }
}
