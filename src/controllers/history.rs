//! Stand-in for the lead's `controllers::history` (ControllerRevision history, upstream's
//! `pkg/controller/history`), with only what the DaemonSet controller uses, behind the same
//! names; replaced by main's module when it lands.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Value, json};

/// `apps.ControllerRevisionHashLabelKey`.
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// `getPatch`: `{"spec":{"template":{...,"$patch":"replace"}}}`.
pub fn template_patch(template: &PodTemplateSpec) -> Value {
    let mut template = serde_json::to_value(template).unwrap_or_else(|_| json!({}));
    if let Some(object) = template.as_object_mut() {
        object.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": template}})
}
