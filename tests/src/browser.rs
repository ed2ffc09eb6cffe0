//! `Browser`: Debian's headless Chromium driven through chromedriver (WebDriver, with the
//! `fantoccini` client) for the portal's tests. chromedriver and every Chromium process run in
//! their own process group, which is killed on drop whatever the test did; the profile is a
//! fresh directory, removed with it.
//!
//! `PODDEBUG_CHROMIUM` and `PODDEBUG_CHROMEDRIVER` override `/usr/bin/chromium` and
//! `/usr/bin/chromedriver`.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::pki::TempDir;

/// The bound of every wait on the page.
pub const PAGE_TIMEOUT: Duration = Duration::from_secs(20);

fn path_from(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// Chromium's binary.
pub fn chromium() -> PathBuf {
    path_from("PODDEBUG_CHROMIUM", "/usr/bin/chromium")
}

/// chromedriver's binary.
pub fn chromedriver() -> PathBuf {
    path_from("PODDEBUG_CHROMEDRIVER", "/usr/bin/chromedriver")
}

/// Whether both binaries are there; when not, says so (and panics with `CI=true`).
pub fn available() -> bool {
    for bin in [chromium(), chromedriver()] {
        if !bin.exists() {
            crate::capability::missing(&format!(
                "{} (apt-get install chromium chromium-driver)",
                bin.display()
            ));
            return false;
        }
    }
    true
}

/// A running browser session.
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    driver: Child,
    profile: TempDir,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("driver", &self.driver.id())
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session with a `width`×`height` window.
    pub async fn start(width: u32, height: u32) -> Browser {
        let port = crate::server::free_port();
        let profile = TempDir::new("chromium");
        let driver = Command::new(chromedriver())
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", chromedriver().display()));
        let mut browser_guard = DriverGuard(Some(driver));
        let caps = json!({
            "goog:chromeOptions": {
                "binary": chromium().display().to_string(),
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }
        });
        let caps = match caps {
            Value::Object(m) => m,
            _ => unreachable!("a JSON object literal"),
        };
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + PAGE_TIMEOUT;
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    panic!("no WebDriver session from chromedriver on {url}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let driver = browser_guard.0.take().expect("the driver process");
        Browser {
            client,
            driver,
            profile,
        }
    }

    /// Navigates to `url`.
    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("navigate to {url}: {e}"));
    }

    /// Waits (bounded) until `css` matches an element whose text contains `needle`; its text.
    pub async fn wait_text(&self, css: &str, needle: &str) -> String {
        self.wait_text_scrolled(css, needle, false).await
    }

    /// [`Browser::wait_text`] for what draws itself only while on screen, as a terminal does
    /// (xterm pauses its renderer while the terminal is out of view, and sections above it that
    /// load later can push it down): the element is scrolled into view before each read, as a
    /// user looks at it.
    pub async fn wait_text_on_screen(&self, css: &str, needle: &str) -> String {
        self.wait_text_scrolled(css, needle, true).await
    }

    async fn wait_text_scrolled(&self, css: &str, needle: &str, scroll: bool) -> String {
        let deadline = tokio::time::Instant::now() + PAGE_TIMEOUT;
        let mut last = String::new();
        loop {
            if scroll {
                // Best effort: a page between two views answers again on the next round.
                let _ = self
                    .client
                    .execute(
                        "const e = document.querySelector(arguments[0]); \
                         if (e) e.scrollIntoView({block: 'nearest'}); return null",
                        vec![Value::String(css.to_owned())],
                    )
                    .await;
            }
            if let Ok(el) = self.client.find(Locator::Css(css)).await
                && let Ok(t) = el.text().await
            {
                if t.contains(needle) {
                    return t;
                }
                last = t;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "no {css:?} containing {needle:?} within {PAGE_TIMEOUT:?}; last text: {last:?}\npage:\n{}",
                    self.body_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits (bounded) for an element matching `css`.
    pub async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        let deadline = tokio::time::Instant::now() + PAGE_TIMEOUT;
        loop {
            if let Ok(el) = self.client.find(Locator::Css(css)).await {
                return el;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "no {css:?} within {PAGE_TIMEOUT:?}; page:\n{}",
                    self.body_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the element matching `css`, waiting for it and finding it again if the page
    /// replaced it in between (bounded).
    pub async fn click(&self, css: &str) {
        let deadline = tokio::time::Instant::now() + PAGE_TIMEOUT;
        loop {
            let el = self.wait_for(css).await;
            match el.click().await {
                Ok(()) => return,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    panic!("click {css:?}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Types `text` into the element matching `css` (waiting for it).
    pub async fn fill(&self, css: &str, text: &str) {
        let el = self.wait_for(css).await;
        el.send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("type into {css:?}: {e}"));
    }

    /// Clears the field matching `css` (waiting for it), then types `text` into it.
    pub async fn set(&self, css: &str, text: &str) {
        let el = self.wait_for(css).await;
        el.clear()
            .await
            .unwrap_or_else(|e| panic!("clear {css:?}: {e}"));
        el.send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("type into {css:?}: {e}"));
    }

    /// The whole page's visible text (for failure messages).
    pub async fn body_text(&self) -> String {
        match self.client.find(Locator::Css("body")).await {
            Ok(b) => b.text().await.unwrap_or_default(),
            Err(e) => format!("(no body: {e})"),
        }
    }

    /// Runs `script` in the page; its result.
    pub async fn eval(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("execute {script:?}: {e}"))
    }

    /// Waits (bounded) until `script` (a function body) returns `true` in the page.
    pub async fn wait_until(&self, script: &str, what: &str) {
        let deadline = tokio::time::Instant::now() + PAGE_TIMEOUT;
        loop {
            if self.eval(script).await == Value::Bool(true) {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "{what}: not within {PAGE_TIMEOUT:?}\npage:\n{}",
                    self.body_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Resizes the window.
    pub async fn resize(&self, width: u32, height: u32) {
        self.client
            .set_window_size(width, height)
            .await
            .unwrap_or_else(|e| panic!("resize to {width}x{height}: {e}"));
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        self.client
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("screenshot: {e}"))
    }

    /// Ends the session (Chromium exits), then the driver.
    pub async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.client.clone().close()).await;
        // Drop kills what is left.
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        kill_group(&mut self.driver);
        let _ = std::fs::remove_dir_all(self.profile.path());
    }
}

/// Kills the driver's process group if `start` fails half way.
struct DriverGuard(Option<Child>);

impl Drop for DriverGuard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            kill_group(c);
        }
    }
}

/// SIGKILL to the whole process group of `child` (chromedriver and every Chromium process it
/// started), then reaps `child`.
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}
