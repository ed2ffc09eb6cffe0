//! Four eyes are two people: whether a moderated session's input may pass, judged from the
//! live records of its debug container.
//!
//! A moderator counts only when they are someone other than the people whose input is held:
//! the debug container's creator, and every user who takes part in it with a mode that types
//! (its owner and peers). So the owner's own second attach as a moderator, or a peer who also
//! attaches as a moderator, opens no gate — as a requester never reviews their own debug request.
//! Users are compared by name, the identity kube-apiserver authenticated.

use poddebug_types::SessionMode;

use super::lease::SessionRecord;

/// Whether someone other than the container's creator and the users typing into it moderates
/// the debug container whose live records are `on_container` (which may include `session`
/// itself): the gate of `session` opens only then.
pub fn second_pair_of_eyes<'a>(
    session: &SessionRecord,
    on_container: impl IntoIterator<Item = &'a SessionRecord> + Clone,
) -> bool {
    let held = |user: &str| {
        session.creator.as_deref() == Some(user)
            || session.user == user && session.mode.may_type()
            || on_container
                .clone()
                .into_iter()
                .any(|r| r.user == user && r.mode.may_type())
    };
    on_container
        .clone()
        .into_iter()
        .any(|r| r.mode == SessionMode::Moderator && r.id != session.id && !held(&r.user))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::lease::tests::record;

    fn r(id: &str, user: &str, mode: SessionMode, creator: Option<&str>) -> SessionRecord {
        SessionRecord {
            user: user.into(),
            mode,
            creator: creator.map(str::to_owned),
            ..record(id)
        }
    }

    #[test]
    fn a_moderator_counts_only_when_someone_else() {
        let alice = r("a", "alice", SessionMode::Owner, Some("alice"));
        // Alone: no moderator.
        assert!(!second_pair_of_eyes(&alice, [&alice]));
        // Alice's own second attach as a moderator opens nothing.
        let alice_mod = r("am", "alice", SessionMode::Moderator, Some("alice"));
        assert!(!second_pair_of_eyes(&alice, [&alice, &alice_mod]));
        // Nor when alice is no longer attached as the owner: she made the container.
        assert!(!second_pair_of_eyes(&alice, [&alice_mod]));
        // Mona, someone else, does.
        let mona = r("m", "mona", SessionMode::Moderator, Some("alice"));
        assert!(second_pair_of_eyes(&alice, [&alice, &alice_mod, &mona]));
        // A peer who also moderates holds input of their own: their moderation counts for no
        // one; mona's still does.
        let bob = r("b", "bob", SessionMode::Peer, Some("alice"));
        let bob_mod = r("bm", "bob", SessionMode::Moderator, Some("alice"));
        assert!(!second_pair_of_eyes(&alice, [&alice, &bob, &bob_mod]));
        assert!(!second_pair_of_eyes(&bob, [&alice, &bob, &bob_mod]));
        assert!(second_pair_of_eyes(&bob, [&alice, &bob, &bob_mod, &mona]));
        // An observer is held to nothing: once done observing, they may moderate.
        let carol_obs = r("co", "carol", SessionMode::Observer, Some("alice"));
        let carol_mod = r("cm", "carol", SessionMode::Moderator, Some("alice"));
        assert!(second_pair_of_eyes(
            &alice,
            [&alice, &carol_obs, &carol_mod]
        ));
        // A container whose creator is not recorded: its owner-mode user is the one held.
        let dave = r("d", "dave", SessionMode::Owner, None);
        let dave_mod = r("dm", "dave", SessionMode::Moderator, None);
        assert!(!second_pair_of_eyes(&dave, [&dave, &dave_mod]));
    }
}
