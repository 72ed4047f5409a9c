//! CEL for the ValidatingAdmissionPolicy status controller and the sandbox's validation: our
//! own parser (with cel-go's node positions and error display) and type checker, typing
//! expressions against CEL types made from OpenAPI schemas. See `vendor-docs/cel.md` for why
//! it is ours and docs/controllers/api-objects.md ("ValidatingAdmissionPolicy status") for what
//! it covers.

pub mod checker;
pub mod errors;
pub mod parser;
pub mod types;

pub use checker::{Env, authorizer_type, compile};
pub use types::{Components, Type};
