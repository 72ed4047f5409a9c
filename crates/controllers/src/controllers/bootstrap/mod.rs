//! Bootstrap tokens, after upstream v1.33's `pkg/controller/bootstrap` and the
//! `k8s.io/cluster-bootstrap` helpers it uses: [`signer`] (`bootstrap-signer-controller`) keeps
//! `kube-public/cluster-info` signed with every valid token, [`cleaner`]
//! (`token-cleaner-controller`) deletes tokens once they expire. Both are off by default (kubeadm
//! turns them on with `--controllers=*,bootstrapsigner,tokencleaner`).

pub mod cleaner;
pub mod jws;
pub mod signer;
pub mod token;
