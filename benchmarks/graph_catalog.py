"""A generated catalog of device and app tools whose needs form a graph, and requests that name only their goal
(issue 52, item 5): development data for whole tasks, used beside seal-tools' `links`, never alone.

    python benchmarks/graph_catalog.py OUT [--seed 7] [--providers 4] [--no-graph]

Writes `OUT/tools.jsonl` (catalog entries; `requires` declared unless `--no-graph`) and `OUT/queries.jsonl` (each
request's `relevant`: its goal tool and the goal's whole required closure, goal first; `goal` names the goal), in
the shared benchmark format, so `toolrag eval OUT` and benchmarks/whole_tasks.py read it.

The shape: state prerequisites shared by many tools (Wi-Fi, mobile data, Bluetooth, location services,
permissions: a status check, and a switch that needs the check), parameter producers (the current location, a
contact's address, a validated e-mail, a provider's own search), chains of depth 3-4 (a ride needs the pickup
location, which needs location services switched on, which needs their status), closures of 1-12 tools, several
near-duplicate providers per capability (three to five music, mail, calendar, ride apps), and tools nothing
needs. How it differs from a real catalog: descriptions follow a few templates (real ones vary in length and
quality), every need is declared or none is (real catalogs declare some), requests follow templates with filled
slots and name the app when several could serve, and all requests are English.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class GraphTool:
    name: str
    description: str
    parameters: dict[str, str]  # name -> description
    requires: list[tuple[str, str | None]] = field(default_factory=list)  # (tool, parameter it fills)

    def entry(self, with_graph: bool) -> dict[str, Any]:
        schema = {
            "type": "object",
            "properties": {name: {"type": "string", "description": text} for name, text in self.parameters.items()},
            "required": list(self.parameters),
        }
        entry: dict[str, Any] = {"name": self.name, "description": self.description, "input_schema": schema}
        if with_graph and self.requires:
            entry["requires"] = [{"tool": tool, "parameter": parameter} for tool, parameter in self.requires]
        return entry


# Device states: (state, what it is called in a description). Each has a status check and a switch needing it.
STATES = [
    ("wifi", "Wi-Fi"),
    ("mobile_data", "mobile data"),
    ("bluetooth", "Bluetooth"),
    ("location_service", "location services"),
    ("nfc", "NFC"),
]
PERMISSIONS = ["contacts", "camera", "microphone", "calendar", "storage", "notifications", "health", "sms"]

# Capabilities: (family, providers, goal description, parameters, needs, request templates). A need is a state
# (`state:wifi`), a permission (`permission:camera`), a shared producer (`producer:current_location`) or the
# provider's own producer (`own:search_song`). Templates fill `{app}` and the slots below.
CAPABILITIES: list[tuple[str, list[str], str, dict[str, str], list[str], list[str]]] = [
    (
        "play_song",
        ["spotify", "apple_music", "youtube_music", "deezer", "tidal"],
        "Play a song in the {App} app.",
        {"song_id": "the song's id in the catalog"},
        ["state:wifi", "own:search_song"],
        ["play {song} on {App}", "put on {song} using {App}", "I want to hear {song} in {App}"],
    ),
    (
        "send_email",
        ["gmail", "outlook", "yahoo_mail", "proton_mail"],
        "Send an e-mail from the user's {App} account.",
        {"to": "recipient address", "subject": "subject line", "body": "message text"},
        ["state:wifi", "producer:validated_email", "own:account_status"],
        ["email {email} with {App} about {topic}", "send a mail to {email} from my {App} saying {topic}"],
    ),
    (
        "send_location_email",
        ["gmail", "outlook"],
        "E-mail the device's current position as a map link from {App}.",
        {"to": "recipient address", "location": "latitude,longitude"},
        ["state:wifi", "producer:validated_email", "producer:current_location", "own:account_status"],
        ["send my current location to {email} with {App}", "mail {email} where I am right now using {App}"],
    ),
    (
        "send_message",
        ["whatsapp", "telegram", "signal", "messenger"],
        "Send a chat message to a contact with {App}.",
        {"phone": "the contact's phone number", "text": "message text"},
        ["state:mobile_data", "producer:contact_phone"],
        ["text {person} on {App} that {topic}", "message {person} via {App}: {topic}"],
    ),
    (
        "send_sms",
        ["phone"],
        "Send a text message (SMS) to a contact.",
        {"phone": "the contact's phone number", "text": "message text"},
        ["permission:sms", "producer:contact_phone"],
        ["send an SMS to {person} saying {topic}", "text {person} by SMS that {topic}"],
    ),
    (
        "create_event",
        ["google_calendar", "outlook_calendar", "apple_calendar"],
        "Create an event in {App}.",
        {"title": "event title", "start": "start time, ISO 8601", "timezone": "IANA time zone"},
        ["permission:calendar", "producer:local_timezone", "state:wifi"],
        ["add {topic} to my {App} tomorrow at 10", "put a meeting about {topic} in {App} on Friday"],
    ),
    (
        "book_ride",
        ["uber", "lyft", "bolt"],
        "Book a ride with {App} from the current position to an address.",
        {"pickup": "latitude,longitude", "destination": "destination coordinates", "payment_id": "payment method"},
        ["producer:current_location", "producer:geocoded_address", "state:mobile_data", "own:payment_method"],
        ["get me a {App} to {place}", "book a {App} ride to {place}", "I need a car to {place} via {App}"],
    ),
    (
        "navigate",
        ["google_maps", "apple_maps", "waze"],
        "Start turn-by-turn navigation in {App}.",
        {"origin": "latitude,longitude", "destination": "destination coordinates"},
        ["producer:current_location", "producer:geocoded_address", "state:mobile_data"],
        ["navigate to {place} with {App}", "take me to {place} in {App}"],
    ),
    (
        "video_call",
        ["zoom", "google_meet", "facetime", "teams"],
        "Start a video call with a contact in {App}.",
        {"phone": "the contact's phone number"},
        ["permission:camera", "permission:microphone", "producer:contact_phone", "state:wifi"],
        ["video call {person} on {App}", "start a {App} video chat with {person}"],
    ),
    (
        "post_photo",
        ["instagram", "facebook", "twitter"],
        "Post a photo with a caption on {App}.",
        {"photo_url": "uploaded photo", "caption": "caption text"},
        ["producer:uploaded_photo", "own:account_status", "state:wifi"],
        ["post my last photo on {App} with the caption {topic}", "share the latest picture to {App}: {topic}"],
    ),
    (
        "send_money",
        ["paypal", "venmo", "revolut"],
        "Send money to a contact with {App}.",
        {"phone": "the contact's phone number", "amount": "amount", "payment_id": "payment method"},
        ["producer:contact_phone", "own:payment_method", "own:identity_check", "state:mobile_data"],
        ["send {amount} to {person} with {App}", "pay {person} {amount} on {App}"],
    ),
    (
        "weather_here",
        ["weather_channel", "accuweather"],
        "The forecast for the device's current position from {App}.",
        {"location": "latitude,longitude"},
        ["producer:current_location", "state:wifi"],
        ["what's the weather here according to {App}", "will it rain where I am, {App}?"],
    ),
    (
        "nearby_restaurants",
        ["yelp", "tripadvisor"],
        "Restaurants near the device's current position on {App}.",
        {"location": "latitude,longitude", "cuisine": "kind of food"},
        ["producer:current_location", "state:mobile_data"],
        ["find {food} places near me on {App}", "{App}: good {food} restaurants around here"],
    ),
    (
        "connect_headphones",
        ["bluetooth_audio"],
        "Connect paired Bluetooth headphones.",
        {"device_id": "paired device"},
        ["state:bluetooth", "own:paired_devices"],
        ["connect my headphones", "pair my earbuds to the phone"],
    ),
    (
        "record_memo",
        ["voice_recorder"],
        "Record a voice memo and save it.",
        {"title": "memo title"},
        ["permission:microphone", "permission:storage"],
        ["record a voice memo called {topic}", "start recording a note about {topic}"],
    ),
    (
        "log_workout",
        ["strava", "fitbit"],
        "Log a workout in {App}.",
        {"kind": "kind of workout", "route": "recorded route"},
        ["permission:health", "producer:current_location", "state:wifi"],
        ["log my {sport} on {App}", "save today's {sport} to {App}"],
    ),
    (
        "tap_to_pay",
        ["google_wallet", "apple_wallet"],
        "Pay at a terminal by tapping the phone, with {App}.",
        {"card_id": "card"},
        ["state:nfc", "own:identity_check", "own:payment_method"],
        ["pay with {App} at the till", "use {App} to tap and pay"],
    ),
    (
        "set_alarm",
        ["clock"],
        "Set an alarm.",
        {"time": "time of day"},
        [],
        ["wake me up at 6:30", "set an alarm for 7 tomorrow", "alarm at 5:45 please"],
    ),
    (
        "flashlight",
        ["torch"],
        "Turn the camera flash on as a flashlight.",
        {},
        ["permission:camera"],
        ["turn on the flashlight", "I need the torch on"],
    ),
    (
        "share_eta",
        ["google_maps", "waze"],
        "Share the arrival time of the current trip with a contact from {App}.",
        {"origin": "latitude,longitude", "destination": "destination coordinates", "phone": "contact's phone"},
        [
            "producer:current_location",
            "producer:geocoded_address",
            "producer:contact_phone",
            "state:mobile_data",
            "own:account_status",
            "permission:notifications",
        ],
        ["tell {person} when I'll get to {place}, using {App}", "share my ETA to {place} with {person} on {App}"],
    ),
    (
        "lights_on",
        ["philips_hue", "lifx"],
        "Turn on the lights of a room with {App}.",
        {"room": "room name"},
        ["state:wifi", "own:find_hub"],
        ["turn on the {room} lights with {App}", "{App}: lights on in the {room}"],
    ),
]

# Shared producers: name -> (description, parameters, what it fills, its own needs).
PRODUCERS: dict[str, tuple[str, dict[str, str], str, list[str]]] = {
    "current_location": ("The device's current latitude and longitude.", {}, "location", ["state:location_service"]),
    "geocoded_address": ("Coordinates of a street address or place name.", {"address": "address"}, "destination", []),
    "validated_email": ("Check that an e-mail address is well formed and deliverable.", {"email": "address"}, "to", []),
    "contact_phone": (
        "A contact's phone number, looked up by name.",
        {"name": "contact name"},
        "phone",
        ["permission:contacts"],
    ),
    "local_timezone": ("The device's IANA time zone.", {}, "timezone", []),
    "uploaded_photo": (
        "Upload the latest photo from the gallery; returns its URL.",
        {},
        "photo_url",
        ["permission:storage"],
    ),
}
# Per-provider producers: name -> (description template, parameters, what it fills, needs).
OWN: dict[str, tuple[str, dict[str, str], str | None, list[str]]] = {
    "search_song": ("Search the {App} catalog for a song.", {"query": "title or artist"}, "song_id", []),
    "account_status": ("Whether the user is signed in to {App}.", {}, None, ["state:wifi"]),
    "payment_method": ("The default payment method saved in {App}.", {}, "payment_id", ["own:identity_check"]),
    "identity_check": (
        "Confirm the user's identity with a fingerprint before a {App} payment.",
        {},
        None,
        ["own:account_status"],
    ),
    "paired_devices": ("Bluetooth devices paired with this phone.", {}, "device_id", []),
    "find_hub": ("Find the {App} bridge on the local network.", {}, None, []),
}
# Tools nothing needs and no request names: settings and information screens, near-duplicates across apps.
DISTRACTORS = [
    ("open_settings", "Open the {App} settings screen."),
    ("clear_cache", "Clear the {App} app's cached data."),
    ("notification_settings", "Change which notifications {App} shows."),
    ("app_version", "The installed version of {App}."),
]
SLOTS = {
    "song": ["Bohemian Rhapsody", "Blinding Lights", "Hey Jude", "Shape of You", "Clair de Lune", "Hotel California"],
    "email": ["john@example.com", "maria.garcia@example.org", "team@acme.io", "li.wei@example.net"],
    "topic": ["the budget review", "dinner plans", "the project launch", "the dentist appointment", "my new job"],
    "person": ["Anna", "my brother", "Carlos", "Dr. Patel", "mom"],
    "place": ["the airport", "Central Station", "12 Baker Street", "the city museum", "Joe's Pizza"],
    "amount": ["$20", "45 euros", "$12.50", "100 dollars"],
    "food": ["sushi", "vegan", "Italian", "Thai"],
    "sport": ["morning run", "bike ride", "hike"],
    "room": ["kitchen", "living room", "bedroom"],
}


def generate(seed: int, providers: int) -> tuple[list[GraphTool], list[dict[str, Any]]]:
    """The catalog (every tool, `requires` declared) and the requests, `providers` at most per capability."""
    rng = random.Random(seed)
    tools: dict[str, GraphTool] = {}
    for state, called in STATES:
        status, switch = f"check_{state}_status", f"enable_{state}"
        tools[status] = GraphTool(status, f"Whether {called} is on.", {})
        tools[switch] = GraphTool(switch, f"Turn {called} on (asks the user when needed).", {}, [(status, None)])
    for permission in PERMISSIONS:
        check, ask = f"check_{permission}_permission", f"request_{permission}_permission"
        tools[check] = GraphTool(check, f"Whether the app may use the {permission.replace('_', ' ')}.", {})
        tools[ask] = GraphTool(ask, f"Ask the user for {permission} access.", {}, [(check, None)])

    def needed(need: str, app: str, App: str) -> tuple[str, str | None]:
        kind, _, what = need.partition(":")
        if kind == "state":
            return f"enable_{what}", None
        if kind == "permission":
            return f"request_{what}_permission", None
        if kind == "producer":
            text, parameters, fills, own_needs = PRODUCERS[what]
            name = f"get_{what}"
            if name not in tools:
                tools[name] = GraphTool(name, text, parameters, [needed(n, app, App) for n in own_needs])
            return name, fills
        template, parameters, fills_own, own_needs = OWN[what]
        name = f"{app}_{what}"
        if name not in tools:
            own = [needed(n, app, App) for n in own_needs]
            tools[name] = GraphTool(name, template.format(App=App), parameters, own)
        return name, fills_own

    requests: list[dict[str, Any]] = []
    for family, apps, description, parameters, needs, templates in CAPABILITIES:
        for app in apps[:providers]:
            App = app.replace("_", " ").title()
            goal = f"{app}_{family}" if len(apps) > 1 or app != family else family
            requires = [needed(need, app, App) for need in needs]
            tools[goal] = GraphTool(goal, description.format(App=App), parameters, requires)
            for text, _ in DISTRACTORS:
                name = f"{app}_{text}"
                tools.setdefault(name, GraphTool(name, _.format(App=App), {}))
            for number, template in enumerate(templates):
                filled = template.format(App=App, **{slot: rng.choice(values) for slot, values in SLOTS.items()})
                requests.append({"id": f"{goal}#{number}", "query": filled, "goal": goal})
    catalog = list(tools.values())
    rng.shuffle(catalog)
    for request in requests:
        request["relevant"] = [request["goal"], *closure(tools, request["goal"])]
        request["lang"] = "en"
    return catalog, requests


def closure(tools: dict[str, GraphTool], goal: str) -> list[str]:
    """What `goal` requires, directly or not, each once, in the order first met (depth first)."""
    seen: list[str] = []

    def visit(name: str) -> None:
        for needed, _ in tools[name].requires:
            if needed not in seen and needed != goal:
                seen.append(needed)
                visit(needed)

    visit(goal)
    return seen


def write(folder: Path, catalog: list[GraphTool], requests: list[dict[str, Any]], with_graph: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(tool.entry(with_graph)) for tool in catalog]
    (folder / "tools.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in requests) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--providers", type=int, default=5, help="near-duplicate providers per capability at most")
    parser.add_argument("--no-graph", action="store_true", help="declare no `requires`")
    args = parser.parse_args()
    catalog, requests = generate(args.seed, args.providers)
    write(args.out, catalog, requests, not args.no_graph)
    sizes = sorted(len(r["relevant"]) for r in requests)
    print(
        f"{len(catalog)} tools, {len(requests)} requests; needed set sizes {sizes[0]}-{sizes[-1]}"
        f" (median {sizes[len(sizes) // 2]}), written to {args.out}"
    )


if __name__ == "__main__":
    main()
