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
# Part (B): the sandbox grouped into apiserver/, storage/, auth/, cli/ (admission/, nodes/ and
# server.rs stay where they were). Each old module, with `::` or `;` after it.
s/::sandbox::api::\(send_json\|send_error\)\b/::sandbox::apiserver::responses::\1/g
s/::sandbox::api::\(write_update\)\b/::sandbox::apiserver::handlers::update::\1/g
s/::sandbox::api::\(delete_in\|DeleteOptions\|DeleteOutcome\)\b/::sandbox::apiserver::handlers::delete::\1/g
s/::sandbox::api::\(ObjectFilter\|too_large\|validate_list_options\)\b/::sandbox::apiserver::handlers::list::\1/g
s/::sandbox::api\([:;]\)/::sandbox::apiserver\1/g
s/::sandbox::audit\([:;]\)/::sandbox::apiserver::audit\1/g
s/::sandbox::convert\([:;]\)/::sandbox::apiserver::convert\1/g
s/::sandbox::defaults\([:;]\)/::sandbox::apiserver::defaults\1/g
s/::sandbox::discovery\([:;]\)/::sandbox::apiserver::discovery\1/g
s/::sandbox::faults\([:;]\)/::sandbox::apiserver::faults\1/g
s/::sandbox::metadata\([:;]\)/::sandbox::apiserver::metadata\1/g
s/::sandbox::patch\([:;]\)/::sandbox::apiserver::patch\1/g
s/::sandbox::protobuf\([:;]\)/::sandbox::apiserver::protobuf\1/g
s/::sandbox::selectors\([:;]\)/::sandbox::apiserver::field_selector\1/g
s/::sandbox::status\([:;]\)/::sandbox::apiserver::status\1/g
s/::sandbox::subresources\([:;]\)/::sandbox::apiserver::subresources\1/g
s/::sandbox::table\([:;]\)/::sandbox::apiserver::table\1/g
s/::sandbox::typed\([:;]\)/::sandbox::apiserver::typed\1/g
s/::sandbox::watch\([:;]\)/::sandbox::apiserver::handlers::watch\1/g
s/::sandbox::objects\([:;]\)/::sandbox::storage::objects\1/g
s/::sandbox::resources\([:;]\)/::sandbox::storage::resources\1/g
s/::sandbox::services\([:;]\)/::sandbox::storage::services\1/g
s/::sandbox::store\([:;]\)/::sandbox::storage::store\1/g
s/::sandbox::rbac\([:;]\)/::sandbox::auth::rbac\1/g
s/::sandbox::bootstrap_policy\([:;]\)/::sandbox::auth::bootstrap_policy\1/g
s/::sandbox::demo\([:;]\)/::sandbox::cli::demo\1/g
# Part (A), clocks the apimachinery clock replaced (its wall reading is `Clock::wall`).
s/runtime::events::correlator::SystemClock/apimachinery::clock::RealClock/g
s/runtime::events::correlator::Clock\b/apimachinery::clock::Clock/g
