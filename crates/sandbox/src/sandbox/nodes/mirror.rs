//! A local copy of one collection, kept current by list + watch: the informer cache of the
//! simulated kubelets and scheduler. It is driven from the worker's loop: [`Mirror::sync`]
//! takes in whatever the watch delivered since the last call, without blocking.

use std::collections::BTreeMap;

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::client::{Error, ListParams, Result, WatchEvent, WatchParams, WatchReceiver};

/// Events a watch may hold back before its reader thread waits for us.
pub const WATCH_CAPACITY: usize = 4096;
/// The server ends each watch after about this long; we then watch again from where it ended.
const WATCH_TIMEOUT_SECONDS: u32 = 300;

type ListFn<K> = Box<dyn Fn(&ListParams) -> Result<(Vec<K>, String)> + Send>;
type WatchFn<K> = Box<dyn Fn(&WatchParams) -> Result<WatchReceiver<K>> + Send>;
type KeepFn<K> = Box<dyn Fn(&K) -> bool + Send>;

/// How to list and watch the collection (closures, so that the mirror works for any kind the
/// client can list and watch).
pub struct Source<K> {
    pub list: ListFn<K>,
    pub watch: WatchFn<K>,
}

/// The objects of a collection by `namespace/name`, as last seen.
pub struct Mirror<K> {
    source: Source<K>,
    objects: BTreeMap<String, K>,
    /// Where the watch resumes.
    resource_version: String,
    watch: Option<WatchReceiver<K>>,
    /// The next sync lists everything again (no list yet, or the watch fell too far behind).
    needs_list: bool,
    /// Which objects the mirror holds (all without one). A worker's kubelets need only the
    /// pods bound to their nodes: at 30,000 pods, eight full copies would not fit the machine.
    keep: Option<KeepFn<K>>,
}

impl<K> Mirror<K>
where
    K: Metadata<Ty = ObjectMeta> + Clone,
{
    pub fn new(source: Source<K>) -> Mirror<K> {
        Mirror {
            source,
            objects: BTreeMap::new(),
            resource_version: String::new(),
            watch: None,
            needs_list: true,
            keep: None,
        }
    }

    /// The same mirror holding only the objects `keep` accepts; an object it stops accepting
    /// is dropped at its next event.
    pub fn keeping(mut self, keep: impl Fn(&K) -> bool + Send + 'static) -> Mirror<K> {
        self.keep = Some(Box::new(keep));
        self
    }

    fn keeps(&self, object: &K) -> bool {
        self.keep.as_ref().is_none_or(|keep| keep(object))
    }

    /// Takes in the changes the watch has delivered; lists again and restarts the watch when
    /// needed. On error the mirror keeps its objects and tries again on the next call.
    pub fn sync(&mut self) -> Result<()> {
        if self.needs_list {
            self.relist()?;
        }
        if self.watch.is_none() {
            self.start_watch()?;
        }
        while let Some(next) = self.watch.as_ref().map(|w| w.channel().try_recv()) {
            match next {
                Ok(Ok(event)) => self.apply(event),
                Ok(Err(e)) => {
                    self.watch = None;
                    if e.is_gone() {
                        log::debug!("watch expired ({e}); listing again");
                        self.needs_list = true;
                    } else {
                        log::debug!("watch ended: {e}");
                    }
                    return Ok(());
                }
                Err(crossbeam_channel::TryRecvError::Empty) => return Ok(()),
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    // The server closed the watch (its timeout, or the server went away).
                    self.watch = None;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn relist(&mut self) -> Result<()> {
        let (items, resource_version) = (self.source.list)(&ListParams::default())?;
        self.objects = items.into_iter().filter(|o| self.keeps(o)).map(|o| (key_of(&o), o)).collect();
        self.resource_version = resource_version;
        self.needs_list = false;
        self.watch = None;
        Ok(())
    }

    fn start_watch(&mut self) -> Result<()> {
        let params = WatchParams {
            resource_version: Some(self.resource_version.clone()),
            allow_bookmarks: true,
            timeout_seconds: Some(WATCH_TIMEOUT_SECONDS),
            ..WatchParams::default()
        };
        match (self.source.watch)(&params) {
            Ok(watch) => {
                self.watch = Some(watch);
                Ok(())
            }
            Err(e) => {
                self.needs_list = e.is_gone();
                Err(e)
            }
        }
    }

    fn apply(&mut self, event: WatchEvent<K>) {
        match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                self.note_version(&object);
                self.observe(object);
            }
            WatchEvent::Deleted(object) => {
                self.note_version(&object);
                self.objects.remove(&key_of(&object));
            }
            WatchEvent::Bookmark { resource_version } => self.resource_version = resource_version,
        }
    }

    fn note_version(&mut self, object: &K) {
        if let Some(rv) = object.metadata().resource_version.as_ref() {
            self.resource_version = rv.clone();
        }
    }

    /// Records an object we just read or wrote, unless the mirror already has a newer copy (or
    /// does not keep such objects).
    pub fn observe(&mut self, object: K) {
        let key = key_of(&object);
        if !self.keeps(&object) {
            self.objects.remove(&key);
            return;
        }
        if let Some(current) = self.objects.get(&key)
            && is_older(object.metadata().resource_version.as_deref(), current.metadata().resource_version.as_deref())
            && object.metadata().uid == current.metadata().uid
        {
            return;
        }
        self.objects.insert(key, object);
    }

    /// Forgets an object we know is gone.
    pub fn forget(&mut self, namespace: &str, name: &str) {
        self.objects.remove(&format!("{namespace}/{name}"));
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<&K> {
        self.objects.get(&format!("{namespace}/{name}"))
    }

    pub fn values(&self) -> impl Iterator<Item = &K> {
        self.objects.values()
    }

    /// Whether the mirror holds a complete list (it may still lag the server a little).
    pub fn is_listed(&self) -> bool {
        !self.needs_list
    }
}

/// `namespace/name` (an empty namespace for cluster-scoped kinds).
fn key_of<K: Metadata<Ty = ObjectMeta>>(object: &K) -> String {
    let meta = object.metadata();
    format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
}

/// Whether resourceVersion `a` is older than `b`. They are opaque to clients in general; the
/// sandbox's (like etcd's) are increasing integers, and anything else counts as not older.
fn is_older(a: Option<&str>, b: Option<&str>) -> bool {
    match (a.and_then(|a| a.parse::<u64>().ok()), b.and_then(|b| b.parse::<u64>().ok())) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    }
}

/// Whether an error is worth a debug line only (the server is away or busy) rather than a warning.
pub fn is_transient(error: &Error) -> bool {
    error.is_transport()
        || error.is_conflict()
        || error.is_server_timeout()
        || error.is_too_many_requests()
        || error.is_service_unavailable()
        || error.is_internal_error()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Pod, PodSpec};

    use super::*;

    fn pod(name: &str, node: Option<&str>, resource_version: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(resource_version.into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec { node_name: node.map(String::from), ..PodSpec::default() }),
            ..Pod::default()
        }
    }

    #[test]
    fn a_keeping_mirror_holds_only_what_it_keeps() {
        let listed = vec![pod("a", Some("node-a"), "1"), pod("b", Some("node-b"), "2"), pod("c", None, "3")];
        let source = Source {
            list: Box::new(move |_: &ListParams| Ok((listed.clone(), "3".to_string()))),
            watch: Box::new(|_: &WatchParams| Err(Error::Request("no watch in this test".into()))),
        };
        let on_node_a = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("node-a");
        let mut mirror = Mirror::new(source).keeping(on_node_a);
        mirror.relist().expect("listed");
        let names =
            |m: &Mirror<Pod>| m.values().map(|p| p.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>();
        assert_eq!(names(&mirror), ["a"]);

        // Bound to the kept node: taken in; an update that it no longer accepts drops it.
        mirror.apply(WatchEvent::Modified(pod("c", Some("node-a"), "4")));
        assert_eq!(names(&mirror), ["a", "c"]);
        mirror.observe(pod("a", Some("node-b"), "5"));
        assert_eq!(names(&mirror), ["c"]);
        mirror.apply(WatchEvent::Added(pod("d", Some("node-b"), "6")));
        assert_eq!(names(&mirror), ["c"]);
        assert_eq!(mirror.resource_version, "6", "events it does not keep still move the watch on");
    }

    #[test]
    fn resource_versions_compare_as_numbers() {
        assert!(is_older(Some("9"), Some("10")));
        assert!(!is_older(Some("10"), Some("10")));
        assert!(!is_older(Some("11"), Some("10")));
        assert!(!is_older(Some("x"), Some("10")));
        assert!(!is_older(None, Some("10")));
    }
}
