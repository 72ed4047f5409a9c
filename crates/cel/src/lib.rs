//! The CEL type checker of kube-controller-manager (Rust): ValidatingAdmissionPolicy
//! expressions parsed and type-checked as upstream's cel-go checks them, for the policy status
//! controller and the sandbox's admission. It uses nothing else of ours, which the compiler
//! holds; the `kcm` library re-exports it as `kcm::cel`.

#![warn(missing_docs)]

pub mod cel;
