# Part (A): ports of apimachinery helpers moved to src/apimachinery/.
s/kcm::runtime::clock::/kcm::apimachinery::clock::/g
s/crate::runtime::clock::/crate::apimachinery::clock::/g
s/kcm::labels::/kcm::apimachinery::labels::/g
s/crate::labels::/crate::apimachinery::labels::/g
s/kcm::runtime::workqueue::INFINITE_DELAY/kcm::apimachinery::flowcontrol::INFINITE_DELAY/g
s/crate::runtime::workqueue::INFINITE_DELAY/crate::apimachinery::flowcontrol::INFINITE_DELAY/g
s/kcm::client::rate_limit::TokenBucket/kcm::client::rate_limit::RequestLimiter/g
s/crate::client::rate_limit::TokenBucket/crate::client::rate_limit::RequestLimiter/g
s/crate::controllers::podutil::update_pod_condition/crate::apimachinery::pod::update_pod_condition/g
