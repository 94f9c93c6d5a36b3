//! [`Sessions`]: console logins. With a token configured, the page logs in once with it and gets a
//! session cookie; the token itself is never stored in the page, and the cookie is `HttpOnly`
//! (no script reads it) and `SameSite=Strict` (no other site's page sends it).
//!
//! Invariants: a session id is 32 bytes from a CSPRNG, shown only in its `Set-Cookie`; at most
//! [`CONSOLE_SESSIONS_MAX_COUNT`] live at once (a new login ends the oldest); each ends
//! [`CONSOLE_SESSION_TTL_MS`] after login or at logout; the token is compared in constant time.

use std::collections::HashMap;
use std::time::Duration;
use std::time::Instant;

use axum::http::HeaderMap;
use axum::http::header::COOKIE;
use raftmq_broker::http::gate::same_secret;
use raftmq_common::limits::CONSOLE_SESSION_TTL_MS;
use raftmq_common::limits::CONSOLE_SESSIONS_MAX_COUNT;
use raftmq_common::sync::lock;
use rand::RngCore;

/// The cookie's name.
pub const COOKIE_NAME: &str = "raftmq_console";

/// Live sessions.
#[derive(Debug, Default)]
pub struct Sessions {
    live: std::sync::Mutex<HashMap<String, Instant>>,
}

impl Sessions {
    /// No sessions.
    pub fn new() -> Self {
        Sessions::default()
    }

    /// A new session if `given` is `token`: its `Set-Cookie` value.
    pub fn login(&self, token: &str, given: &str) -> Option<String> {
        if !same_secret(given.as_bytes(), token.as_bytes()) {
            return None;
        }
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let now = Instant::now();
        let mut live = lock(&self.live);
        live.retain(|_, expiry| *expiry > now);
        while live.len() >= CONSOLE_SESSIONS_MAX_COUNT {
            let oldest = live.iter().min_by_key(|(_, e)| **e).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => live.remove(&k),
                None => break,
            };
        }
        live.insert(id.clone(), now + Duration::from_millis(CONSOLE_SESSION_TTL_MS));
        Some(cookie(&id, CONSOLE_SESSION_TTL_MS / 1_000))
    }

    /// Whether the request's cookie names a live session.
    pub fn valid(&self, headers: &HeaderMap) -> bool {
        let Some(id) = session_id(headers) else { return false };
        let live = lock(&self.live);
        live.iter().any(|(k, expiry)| *expiry > Instant::now() && same_secret(k.as_bytes(), id.as_bytes()))
    }

    /// Ends the request's session; the `Set-Cookie` value that clears it.
    pub fn logout(&self, headers: &HeaderMap) -> String {
        if let Some(id) = session_id(headers) {
            lock(&self.live).remove(&id);
        }
        cookie("", 0)
    }
}

fn cookie(value: &str, max_age_s: u64) -> String {
    format!("{COOKIE_NAME}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}")
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_owned())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn with_cookie(set_cookie: &str) -> HeaderMap {
        let pair = set_cookie.split(';').next().unwrap();
        let mut h = HeaderMap::new();
        h.insert(COOKIE, HeaderValue::from_str(&format!("other=1; {pair}")).unwrap());
        h
    }

    #[test]
    fn a_login_gives_a_strict_http_only_cookie_that_works_until_logout() {
        let s = Sessions::new();
        assert_eq!(s.login("the-token-0123456", "wrong"), None);
        let set = s.login("the-token-0123456", "the-token-0123456").unwrap();
        assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
        assert!(!set.contains("the-token"), "the token is never in the cookie");
        let h = with_cookie(&set);
        assert!(s.valid(&h));
        assert!(!s.valid(&with_cookie("raftmq_console=forged")));
        assert!(!s.valid(&HeaderMap::new()));
        s.logout(&h);
        assert!(!s.valid(&h));
    }

    #[test]
    fn sessions_are_bounded() {
        let s = Sessions::new();
        let first = s.login("t", "t").unwrap();
        for _ in 0..CONSOLE_SESSIONS_MAX_COUNT {
            s.login("t", "t").unwrap();
        }
        assert!(!s.valid(&with_cookie(&first)), "the oldest session ended");
        assert_eq!(lock(&s.live).len(), CONSOLE_SESSIONS_MAX_COUNT);
    }
}
