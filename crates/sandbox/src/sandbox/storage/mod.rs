//! Where objects live, as etcd and the registries behind kube-apiserver: the [`store`] (every
//! object as JSON, one revision counter, the change history watches read), the [`resources`]
//! table of the kinds served, the metadata rules every object follows ([`objects`]), and the
//! Service registry's allocators ([`services`]).

pub mod objects;
pub mod resources;
pub mod services;
pub mod store;
