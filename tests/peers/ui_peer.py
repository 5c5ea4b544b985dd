"""Clicks through Rudder's debug UI in headless Chromium (Playwright driving Debian's chromium).

Usage: ui_peer.py <base-url> <config-file> <screenshot-dir>

The daemon behind <base-url> serves the mesh in <config-file> (the test's ServiceEntry,
DestinationRule and VirtualService for reviews in namespace shop), with a real Envoy sidecar
(client-0.shop), a real Envoy gateway and a simulated proxy (nacker-0.shop) whose last RDS
response was NACKed. The walk edits <config-file> once to cause a push. Any failed expectation, and
any console error or uncaught page error, exits non-zero with the reason.
"""

import os
import re
import sys

from playwright.sync_api import expect, sync_playwright

BASE, CONFIG, SHOTS = sys.argv[1], sys.argv[2], sys.argv[3]
CLUSTER = "outbound|9080|v1|reviews.shop.svc.cluster.local"


def main():
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 700})
        page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        expect.set_options(timeout=15_000)

        # Landing page: istioctl dashboard istiod-debug opens /debug. Proxies, NACK reason shown.
        page.goto(BASE + "/debug")
        main = page.locator("#main")
        expect(main).to_contain_text("client-0.shop")
        expect(main).to_contain_text("RDS rejected: route 9080 has no virtual host")
        expect(page.locator("#nack-count")).to_have_text("1")
        page.screenshot(path=os.path.join(SHOTS, "proxies.png"))

        # A filter narrows the list, and is part of the URL.
        page.fill("#filter", "nacker")
        expect(page).to_have_url(re.compile(r"#/proxies\?q=nacker"))
        expect(main).not_to_contain_text("client-0.shop")
        page.fill("#filter", "")
        expect(main).to_contain_text("client-0.shop")

        # Search across proxies, objects and services; an object opens as a foldable tree.
        page.fill("#search", "reviews")
        page.press("#search", "Enter")
        expect(page).to_have_url(re.compile(r"#/search\?q=reviews"))
        expect(main).to_contain_text("reviews.shop.svc.cluster.local")
        page.screenshot(path=os.path.join(SHOTS, "search.png"))
        page.click("a[href='#/object/VirtualService/shop/reviews']")
        expect(page).to_have_url(re.compile(r"#/object/VirtualService/shop/reviews"))
        expect(main.locator(".json")).to_contain_text("hosts")
        # The back button returns to the search.
        page.go_back()
        expect(page).to_have_url(re.compile(r"#/search\?q=reviews"))
        expect(main).to_contain_text("Config objects")

        # A proxy: its resources, each with the objects that produced it, as Envoy JSON.
        page.click("#nav a[data-view=proxies]")
        page.click("a:has-text('client-0.shop')")
        expect(page).to_have_url(re.compile(r"#/proxy/sidecar"))
        expect(main).to_contain_text("resources at push")
        resource = main.locator(f"details.res[data-res='cds {CLUSTER}']")
        resource.locator("summary").click()
        expect(resource.locator(".json")).to_contain_text("connectTimeout")
        expect(resource).to_contain_text("DestinationRule/shop/reviews")
        page.screenshot(path=os.path.join(SHOTS, "proxy.png"))
        # The open resource is in the URL: a deep link opens it again.
        expect(page).to_have_url(re.compile(r"\?res=cds"))

        # A push lands while the page is open: the view follows it, the open resource stays open
        # and the page stays where it was scrolled.
        version = int(page.inner_text("#push-version"))
        page.evaluate("window.scrollTo(0, 120)")
        scrolled = page.evaluate("window.scrollY")
        text = open(CONFIG).read()
        with open(CONFIG + ".tmp", "w") as f:
            f.write(text.replace("subset: v1}}]}]", "subset: v1}}], timeout: 7s}]"))
        os.rename(CONFIG + ".tmp", CONFIG)
        expect(page.locator("#push-version")).not_to_have_text(str(version))
        expect(main).to_contain_text(f"resources at push {version + 1}")
        expect(resource).to_have_attribute("open", "")
        expect(resource.locator(".json")).to_contain_text("connectTimeout")
        now = page.evaluate("window.scrollY")
        if abs(now - scrolled) > 2:
            errors.append(f"scroll moved from {scrolled} to {now} on a push")

        # The proxy's config between the two pushes: the route gained the timeout.
        page.select_option("#diff-from", str(version))
        page.select_option("#diff-to", str(version + 1))
        page.click("#diff-go")
        expect(page).to_have_url(re.compile(rf"from={version}&to={version + 1}"))
        expect(main).to_contain_text(f"Changes from push {version} to push {version + 1}")
        changed = main.locator("details.res[data-key='diff:rds 9080']")
        expect(changed).to_contain_text("changed")
        expect(changed.locator(".diff .add")).to_contain_text(["timeout"])
        page.screenshot(path=os.path.join(SHOTS, "diff.png"))

        # Log levels per scope, as ControlZ sets them.
        page.click("#nav a[data-view=logging]")
        page.select_option("select[data-scope=ads]", "debug")
        expect(page.locator("#log-result")).to_contain_text("ads set to debug")
        expect(page.locator("#log-level")).to_contain_text("debug")
        # xds is served by the same module as ads: it follows.
        expect(page.locator("select[data-scope=xds]")).to_have_value("debug")
        page.screenshot(path=os.path.join(SHOTS, "logging.png"))

        # The process, its arguments and environment.
        page.click("#nav a[data-view=process]")
        expect(main).to_contain_text("Arguments")
        expect(main).to_contain_text("serve")

        # istiod's debug pages, listed and linked.
        page.click("#nav a[data-view=endpoints]")
        expect(main.locator("a[href='/debug/syncz']")).to_be_visible()

        # A page left open on a quiet mesh costs one small poll every two seconds: the proxies
        # view does not refetch its list, and the summary stays small after a push.
        page.click("#nav a[data-view=proxies]")
        expect(main).to_contain_text("client-0.shop")
        page.wait_for_timeout(3_000)
        seen = []

        def record(response):
            if "/debug/" in response.url:
                try:
                    seen.append((response.url, len(response.body())))
                except Exception as e:  # a response still streaming when the page moves on
                    seen.append((response.url, 0))

        page.on("response", record)
        page.wait_for_timeout(8_000)
        page.remove_listener("response", record)
        polls = [n for url, n in seen if url.endswith("/debug/ui/summary")]
        others = [url for url, _ in seen if not url.endswith("/debug/ui/summary")]
        if others:
            errors.append(f"a quiet page fetched more than its poll: {others}")
        if not 3 <= len(polls) <= 5:
            errors.append(f"{len(polls)} summary polls in 8 s, expected one every 2 s")
        if any(n > 1_000 for n in polls):
            errors.append(f"summary polls of {polls} bytes: more than a few hundred")
        print(f"quiet page: {len(polls)} polls in 8 s, {sum(polls)} bytes")

        # A deep link opens its view directly.
        fresh = browser.new_page()
        fresh.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        fresh.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        fresh.goto(BASE + "/debug#/object/DestinationRule/shop/reviews")
        expect(fresh.locator("#main .json")).to_contain_text("subsets")
        browser.close()
    if errors:
        sys.exit("\n".join(errors))
    print("ui walk ok")


if __name__ == "__main__":
    main()
