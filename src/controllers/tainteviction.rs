//! The taint eviction controller (`taint-eviction-controller`): the NoExecute taint manager of
//! [`crate::controllers::taintmanager`] run as a controller of its own, as upstream does with the
//! `SeparateTaintEvictionController` gate (on by default in 1.33).

use std::sync::Arc;

use crate::controllers::taintmanager::TaintEviction;
use crate::runtime::controller::{ControllerContext, ControllerDescriptor, ControllerHandle, Reconciler};
use crate::runtime::workqueue::WorkQueue;

/// `taint-eviction-controller`.
pub const TAINT_EVICTION: ControllerDescriptor = ControllerDescriptor { name: "taint-eviction-controller", init };

/// `UpdateWorkerSize`.
const WORKERS: usize = 8;

fn init(context: &ControllerContext<'_>) -> Result<ControllerHandle, String> {
    let controller = TaintEviction::start(context, context.recorder.clone(), "");
    let mut queues = controller.queues();
    let queue = queues.remove(0);
    Ok(ControllerHandle { queue, reconciler: Arc::new(Standalone { controller, extra: queues }), workers: WORKERS })
}

/// The taint manager as a controller of its own: its first queue is the main one, the others
/// are extra queues.
struct Standalone {
    controller: Arc<TaintEviction>,
    extra: Vec<WorkQueue<String>>,
}

impl Reconciler for Standalone {
    fn sync(&self, key: &str) -> Result<(), String> {
        self.controller.sync(key)
    }

    fn extra_queues(&self) -> Vec<WorkQueue<String>> {
        self.extra.clone()
    }
}
