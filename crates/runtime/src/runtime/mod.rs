//! The machinery every controller runs on, and nothing above it: shared informers
//! (`informer`), client-go workqueues (`workqueue`), the Event recorder (`events`), owner
//! references (`controller_ref`), what a controller awaits of its own writes (`expectations`,
//! and `consistency`: its informers must have seen its last writes before it syncs again),
//! batched writes (`slow_start`), worker threads started on demand (`pool`) and the controller
//! harness (`controller`: typed queues with their handlers and worker pools, periodic tasks,
//! start hooks). A controller file holds only its own reconcile logic; the process around them
//! is `crate::app`.

pub mod consistency;
pub mod controller;
pub mod controller_ref;
pub mod events;
pub mod expectations;
pub mod informer;
pub mod pool;
pub mod slow_start;
pub mod workqueue;
