pub mod pod_template_hash;
