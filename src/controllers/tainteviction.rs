//! The taint eviction controller (`taint-eviction-controller`): the NoExecute taint manager of
//! [`crate::controllers::taintmanager`] run as a controller of its own, as upstream does with the
//! `SeparateTaintEvictionController` gate (on by default in 1.33).

use crate::controllers::taintmanager::TaintEviction;
use crate::runtime::controller::{ControllerContext, ControllerDescriptor, ControllerHandle};
use crate::runtime::workqueue::WorkQueue;

/// `taint-eviction-controller`.
pub const TAINT_EVICTION: ControllerDescriptor = ControllerDescriptor { name: "taint-eviction-controller", init };

/// `UpdateWorkerSize`.
const WORKERS: usize = 8;

fn init(context: &ControllerContext<'_>) -> Result<ControllerHandle, String> {
    let queue = WorkQueue::new("noexec_taint_node");
    let controller = TaintEviction::start(context, context.recorder.clone(), queue.clone(), "");
    Ok(ControllerHandle { queue, reconciler: controller, workers: WORKERS })
}
