//! The browser of the console tests: Debian's headless Chromium driven through chromedriver
//! (WebDriver, `fantoccini`). [`Browser::start`] prints `SKIP: <reason>` and gives `None` where
//! either is missing. Waits are DOM conditions polled until a deadline, never sleeps; every
//! screenshot goes under the test output folder (`$CARGO_TARGET_TMPDIR/console/<test>/`).

#![allow(dead_code)]

use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use fantoccini::Client;
use fantoccini::ClientBuilder;
use fantoccini::Locator;
use fantoccini::elements::Element;
use fantoccini::wd::WebDriverCompatibleCommand;
use raftmq_common::test_skip::announce_skip;
use serde_json::Value;
use serde_json::json;
use tokio::time::Instant;

/// How long a DOM condition may take to hold (a page's data comes from a live cluster).
pub const UI_WAIT: Duration = Duration::from_secs(30);
/// How often a condition is checked while waiting.
const POLL: Duration = Duration::from_millis(100);

/// Where a program is on `PATH`, or at one of Debian's places.
fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/lib/chromium")]) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// A headless Chromium session.
pub struct Browser {
    client: Client,
    driver: tokio::process::Child,
    out: PathBuf,
    _profile: tempfile::TempDir,
}

/// chromedriver's (non-W3C, still served) browser log: console messages, uncaught errors,
/// failed loads.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base_url: &url::Url, session_id: Option<&str>) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!("session/{}/se/log", session_id.unwrap_or_default()))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({ "type": "browser" }).to_string()))
    }
}

impl Browser {
    /// Starts chromedriver and a headless Chromium at laptop width; `None` (after printing SKIP)
    /// when Chromium or chromedriver is not installed.
    pub async fn start(test: &str) -> Result<Option<Browser>> {
        let Some(chromium) = find_program(&["chromium", "chromium-browser", "google-chrome"]) else {
            announce_skip(test, "Chromium is not installed (apt-get install chromium chromium-driver)");
            return Ok(None);
        };
        let Some(chromedriver) = find_program(&["chromedriver"]) else {
            announce_skip(test, "chromedriver is not installed (apt-get install chromium-driver)");
            return Ok(None);
        };
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console").join(test);
        std::fs::create_dir_all(&out)?;
        let port = super::harness::ports::free_port();
        let driver = tokio::process::Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(out.join("chromedriver.log"))?)
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", chromedriver.display()))?;
        let deadline = Instant::now() + UI_WAIT;
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            if Instant::now() > deadline {
                bail!("chromedriver did not listen on {port} within {UI_WAIT:?}");
            }
            tokio::time::sleep(POLL).await;
        }
        let profile = tempfile::tempdir()?;
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,900", "--hide-scrollbars", "--no-first-run",
                         format!("--user-data-dir={}", profile.path().display())],
            }),
        );
        caps.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .context("a WebDriver session with headless Chromium")?;
        println!("browser: {} via {} (screenshots in {})", chromium.display(), chromedriver.display(), out.display());
        Ok(Some(Browser { client, driver, out, _profile: profile }))
    }

    /// The client, for anything not wrapped here.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Opens `url`.
    pub async fn open(&self, url: &str) -> Result<()> {
        self.client.goto(url).await.with_context(|| format!("opening {url}"))
    }

    /// Polls `probe` until it gives `Some`, for at most [`UI_WAIT`].
    pub async fn until<T, F, Fut>(&self, what: &str, mut probe: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>>>,
    {
        let deadline = Instant::now() + UI_WAIT;
        let mut last_error = None;
        loop {
            match probe().await {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => {}
                Err(e) => last_error = Some(e),
            }
            if Instant::now() > deadline {
                let shot = self.screenshot("timeout").await.map(|p| p.display().to_string()).unwrap_or_default();
                bail!("{what}: not within {UI_WAIT:?} (last error: {last_error:?}; screenshot {shot})");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The first element matching `css`, once there is one.
    pub async fn wait_css(&self, css: &str) -> Result<Element> {
        self.until(&format!("an element {css}"), || async {
            Ok(self.client.find_all(Locator::Css(css)).await?.into_iter().next())
        })
        .await
    }

    /// The text of the first element matching `css`, once `ok` holds for it.
    pub async fn wait_text(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> Result<String> {
        self.until(what, || async {
            let Some(el) = self.client.find_all(Locator::Css(css)).await?.into_iter().next() else { return Ok(None) };
            let text = el.text().await?;
            Ok(ok(&text).then_some(text))
        })
        .await
    }

    /// Opens the console page `hash` (`#/cluster`) and waits until its first data has loaded.
    pub async fn open_page(&self, base: &str, hash: &str, page: &str) -> Result<()> {
        // A hash change alone keeps the document: go through a blank page so each load is whole.
        self.open("about:blank").await?;
        self.open(&format!("{base}/{hash}")).await?;
        self.wait_css(&format!("body[data-loaded=\"{page}\"]")).await?;
        Ok(())
    }

    /// The visible error banner's text, if it shows.
    pub async fn error_banner(&self) -> Result<Option<String>> {
        let el = self.client.find(Locator::Id("error")).await?;
        if el.attr("hidden").await?.is_some() {
            return Ok(None);
        }
        Ok(Some(el.text().await?))
    }

    /// Console errors logged since the last call (SEVERE entries of the browser log).
    pub async fn console_errors(&self) -> Result<Vec<String>> {
        let log = self.client.issue_cmd(BrowserLog).await.context("reading the browser log")?;
        Ok(log
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == json!("SEVERE"))
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect())
    }

    /// Sets the window's size (phone widths).
    pub async fn resize(&self, width: u32, height: u32) -> Result<()> {
        self.client.set_window_size(width, height).await?;
        Ok(())
    }

    /// Runs `script` in the page.
    pub async fn script(&self, script: &str) -> Result<Value> {
        Ok(self.client.execute(script, Vec::new()).await?)
    }

    /// Saves a PNG of the window as `<name>.png` in the test's output folder.
    pub async fn screenshot(&self, name: &str) -> Result<PathBuf> {
        let png = self.client.screenshot().await?;
        let path = self.out.join(format!("{name}.png"));
        std::fs::write(&path, png)?;
        println!("screenshot: {}", path.display());
        Ok(path)
    }

    /// The output folder.
    pub fn out_dir(&self) -> &Path {
        &self.out
    }

    /// Ends the session and chromedriver.
    pub async fn close(mut self) {
        let _ = self.client.close().await;
        let _ = self.driver.kill().await;
    }
}
