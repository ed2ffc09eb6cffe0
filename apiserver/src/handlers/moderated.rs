//! The moderated-shell rule at create (`--moderated-profiles`, `--moderated-shells`): a debug
//! container, a copy or a node debug container whose profile — the one it gets, computed from
//! what it runs with, not the one it names — is moderated is admitted only as an interactive
//! shell ([`poddebug_types::moderated`]). Anything that would run without a typist (`sh -c`,
//! an image's entrypoint, arguments, environment, hooks) does its work at creation, before any
//! session, moderator or recording, so it is refused.
//!
//! The refusal is a policy decision, answered as the server's other policies (`--allowed-images`)
//! and kube-apiserver's admission policies are: 403 Forbidden, reason `Forbidden`, naming every
//! setting in the way.

use poddebug_types::privilege::Elevation;
use poddebug_types::{ApiError, GROUP};

use crate::state::AppState;

/// Refuse the create of `what` (on `resource`, named `name` in the Status) when one of
/// `profiles` is moderated and `refusals` (why it is not an interactive shell) is not empty.
pub(crate) fn require_interactive_shell(
    st: &AppState,
    profiles: &[Elevation],
    resource: &str,
    name: &str,
    what: &str,
    refusals: Vec<String>,
) -> Result<(), ApiError> {
    let Some(moderated) = st.config.moderated_among(profiles) else {
        return Ok(());
    };
    if refusals.is_empty() {
        return Ok(());
    }
    let profile = if moderated.setting.is_empty() {
        format!("the {} profile", moderated.profile)
    } else {
        format!(
            "the {} profile (it gets {})",
            moderated.profile, moderated.setting
        )
    };
    Err(ApiError::forbidden(
        resource,
        GROUP,
        name,
        format!(
            "{what} runs with {profile}, whose sessions are moderated (--moderated-profiles), so \
             only an interactive shell is admitted: {}",
            refusals.join("; ")
        ),
    ))
}
