//! Side-by-side scenarios of the `deployment` controller: `deployment-create`, `deployment-scale`, `deployment-rollout`, `deployment-rollback`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "deployment-create",
        summary: "a Deployment of 3 rolled out",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: deployment_create,
    },
    Scenario {
        name: "deployment-scale",
        summary: "a Deployment of 2 scaled to 5, then to 1",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: deployment_scale,
    },
    Scenario {
        name: "deployment-rollout",
        summary: "a Deployment's image changed: a rolling update",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: deployment_rollout,
    },
    Scenario {
        name: "deployment-rollback",
        summary: "a rolling update, then the template set back (rollout undo)",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: deployment_rollback,
    },
];

pub(super) fn deployment_create(steps: &mut Steps) -> Result<(), Error> {
    steps.create(DEPLOYMENTS, deployment("web", 3, "nginx:1.27"))?;
    rolled_out(steps, "web", 3)
}

pub(super) fn deployment_scale(steps: &mut Steps) -> Result<(), Error> {
    steps.create(DEPLOYMENTS, deployment("web", 2, "nginx:1.27"))?;
    rolled_out(steps, "web", 2)?;
    steps.patch(&format!("{DEPLOYMENTS}/web"), json!({"spec": {"replicas": 5}}))?;
    rolled_out(steps, "web", 5)?;
    steps.checkpoint("scaled to 5")?;
    steps.patch(&format!("{DEPLOYMENTS}/web"), json!({"spec": {"replicas": 1}}))?;
    rolled_out(steps, "web", 1)
}

pub(super) fn set_image(steps: &Steps, image: &str) -> Result<(), Error> {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    // A merge patch replaces the containers list: give the whole container.
    let mut container = template("web", image)["spec"]["containers"][0].clone();
    container["image"] = json!(image);
    let mut patch = patch;
    patch["spec"]["template"]["spec"]["containers"] = json!([container]);
    steps.patch(&format!("{DEPLOYMENTS}/web"), patch).map(|_| ())
}

pub(super) fn deployment_rollout(steps: &mut Steps) -> Result<(), Error> {
    steps.create(DEPLOYMENTS, deployment("web", 3, "nginx:1.27"))?;
    rolled_out(steps, "web", 3)?;
    steps.checkpoint("first rollout")?;
    set_image(steps, "nginx:1.28")?;
    rolled_out(steps, "web", 3)
}

pub(super) fn deployment_rollback(steps: &mut Steps) -> Result<(), Error> {
    steps.create(DEPLOYMENTS, deployment("web", 3, "nginx:1.27"))?;
    rolled_out(steps, "web", 3)?;
    set_image(steps, "nginx:1.28")?;
    rolled_out(steps, "web", 3)?;
    steps.checkpoint("second revision")?;
    set_image(steps, "nginx:1.27")?;
    rolled_out(steps, "web", 3)
}
