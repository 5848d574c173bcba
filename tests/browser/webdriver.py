"""A small W3C WebDriver client (chromedriver) on the standard library."""
import base64
import json
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


class WebDriverError(RuntimeError):
    pass


class Session:
    def __init__(self, driver_url, chromium, width, height):
        self.base = driver_url.rstrip("/")
        capabilities = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", f"--window-size={width},{height}"]},
        }}}
        self.id = self._call("POST", "/session", capabilities)["sessionId"]

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"{}").get("value", {})
        except urllib.error.HTTPError as e:
            detail = json.loads(e.read() or b"{}").get("value", {})
            raise WebDriverError(f"{method} {path}: {detail.get('error')}: {detail.get('message', '')[:300]}")

    def call(self, method, path, body=None):
        return self._call(method, f"/session/{self.id}{path}", body)

    def open(self, url):
        self.call("POST", "/url", {"url": url})

    def script(self, source, *args):
        return self.call("POST", "/execute/sync", {"script": source, "args": list(args)})

    def find(self, css):
        return self.call("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def click(self, css, attempts=20):
        """A real click (input events through the DevTools protocol), found
        again if the page re-rendered the element in between."""
        for _ in range(attempts):
            try:
                self.call("POST", f"/element/{self.find(css)}/click", {})
                return
            except WebDriverError as e:
                if "stale element" not in str(e) and "no such element" not in str(e):
                    raise
                time.sleep(0.1)
        raise WebDriverError(f"could not click {css}")

    def type(self, css, text):
        self.call("POST", f"/element/{self.find(css)}/value", {"text": text})

    def resize(self, width, height):
        self.call("POST", "/window/rect", {"width": width, "height": height})

    def screenshot(self, path):
        with open(path, "wb") as out:
            out.write(base64.b64decode(self.call("GET", "/screenshot")))

    def wait(self, what, condition, seconds=30):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out after {seconds} s waiting for {what}")

    def close(self):
        try:
            self._call("DELETE", f"/session/{self.id}")
        except Exception:  # the browser may be gone already
            pass
