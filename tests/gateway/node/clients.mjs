// The JavaScript clients of `metis serve` (tests/gateway/test_gateway_node_clients.py): the
// official openai and @anthropic-ai/sdk packages and the Vercel AI SDK (ai, @ai-sdk/openai,
// @ai-sdk/anthropic), unchanged, pointed at the gateway's base URL. Each check runs on its own
// and prints one JSON line: {"check": name, "ok": true} or {"check", "ok": false, "error"}.
//
// node clients.mjs BASE_URL KEY LIMITED_KEY NODE_MODULES_DIR [CHECK ...]
// LIMITED_KEY: a gateway key allowed one request a minute (each SDK uses its own copy of it,
// with the SDK's name after it), to see a rate limit arrive as the SDK's own error.
import { createRequire } from "node:module";
import path from "node:path";

const [baseURL, key, limitedKey, modules, ...only] = process.argv.slice(2);
const require = createRequire(path.join(modules, "clients.cjs"));
const OpenAI = require("openai").default;
const Anthropic = require("@anthropic-ai/sdk").default;
const { zodResponseFormat } = require("openai/helpers/zod");
const { betaTool } = require("@anthropic-ai/sdk/helpers/beta/json-schema");
const { z } = require("zod");
const ai = require("ai");
const { createOpenAI } = require("@ai-sdk/openai");
const { createAnthropic } = require("@ai-sdk/anthropic");

globalThis.AI_SDK_LOG_WARNINGS = false;
const oai = new OpenAI({ apiKey: key, baseURL: `${baseURL}/v1`, maxRetries: 0 });
const claude = new Anthropic({ apiKey: key, baseURL, maxRetries: 0 });
const weather = {
  name: "get_weather",
  description: "Current weather for a city.",
  schema: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false,
  },
};
const chatTool = {
  type: "function",
  function: { name: weather.name, description: weather.description, parameters: weather.schema },
};
const City = z.object({ name: z.string(), population: z.number().int() });

function check(condition, what) {
  if (!condition) throw new Error(`expected ${what}`);
}

async function rejects(promise, errorClass, status) {
  try {
    await promise;
  } catch (error) {
    check(error instanceof errorClass, `${errorClass.name}, got ${error?.constructor?.name}`);
    check(error.status === status, `status ${status}, got ${error.status}`);
    return error;
  }
  throw new Error(`expected ${errorClass.name}, got a reply`);
}

const checks = {
  // openai: Chat Completions, answered by Gemini, Claude and GPT-5 behind the gateway
  async openai_chat() {
    const said = [{ role: "user", content: "Hi" }];
    const whole = await oai.chat.completions.create({ model: "flash", messages: said });
    check(whole.choices[0].message.content === "You said: Hi", "the reply's text");
    check(whole.usage.completion_tokens > 0 && whole._request_id, "usage and a request id");
    const stream = await oai.chat.completions.create({
      model: "sonnet",
      messages: said,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let last;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      last = chunk;
    }
    check(text === "You said: Hi" && last.usage.completion_tokens > 0, "streamed text and usage");
  },
  async openai_chat_tools_two_turns() {
    const messages = [{ role: "user", content: "Weather in Oslo?" }];
    const runner = oai.chat.completions.stream({ model: "sonnet", messages, tools: [chatTool] });
    const first = await runner.finalChatCompletion();
    const call = first.choices[0].message.tool_calls[0];
    check(first.choices[0].finish_reason === "tool_calls", "finish_reason tool_calls");
    check(JSON.parse(call.function.arguments).city === "Oslo", "the call's arguments");
    messages.push(first.choices[0].message, {
      role: "tool",
      tool_call_id: call.id,
      content: "Cold, 2 C",
    });
    const second = await oai.chat.completions.create({ model: "flash", messages, tools: [chatTool] });
    check(second.choices[0].message.content.includes("Cold, 2 C"), "the tool's result used");
  },
  async openai_run_tools() {
    const runner = oai.chat.completions.runTools({
      model: "gpt5",
      messages: [{ role: "user", content: "Weather in Oslo?" }],
      tools: [
        {
          type: "function",
          function: {
            name: weather.name,
            description: weather.description,
            parameters: weather.schema,
            function: async ({ city }) => `Cold in ${city}`,
            parse: JSON.parse,
          },
        },
      ],
    });
    check((await runner.finalContent()) === "According to get_weather: Cold in Oslo.", "answer");
    check((await runner.totalUsage()).completion_tokens > 0, "usage over both turns");
  },
  async openai_chat_parse_zod() {
    const format = zodResponseFormat(City, "city");
    const parsed = await oai.chat.completions.parse({
      model: "sonnet",
      messages: [{ role: "user", content: "A city?" }],
      response_format: format,
    });
    check(typeof parsed.choices[0].message.parsed.population === "number", "a parsed City");
    const runner = oai.chat.completions.stream({
      model: "flash",
      messages: [{ role: "user", content: "A city?" }],
      response_format: format,
    });
    const streamed = await runner.finalChatCompletion();
    check(typeof streamed.choices[0].message.parsed.name === "string", "a streamed City");
  },
  async openai_responses() {
    const whole = await oai.responses.create({ model: "sonnet", input: "Hi" });
    check(whole.output_text === "You said: Hi", "output_text");
    const stream = oai.responses.stream({ model: "flash", input: "Hi" });
    const types = [];
    for await (const event of stream) types.push(event.type);
    const final = await stream.finalResponse();
    check(final.output_text === "You said: Hi", "the streamed output_text");
    check(types[0] === "response.created" && types.at(-1) === "response.completed", "events");
  },
  async openai_responses_tools_two_turns() {
    const tool = { type: "function", name: weather.name, parameters: weather.schema, strict: true };
    const stream = oai.responses.stream({ model: "sonnet", input: "Weather in Lima?", tools: [tool] });
    const first = await stream.finalResponse();
    const call = first.output.find((item) => item.type === "function_call");
    check(JSON.parse(call.arguments).city === "Lima", "the call's arguments");
    const second = await oai.responses.create({
      model: "flash",
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "Mild, 18 C" }],
      tools: [tool],
    });
    check(second.output_text.includes("Mild, 18 C"), "the tool's result used");
  },
  async openai_errors() {
    const wrong = new OpenAI({ apiKey: "wrong", baseURL: `${baseURL}/v1`, maxRetries: 0 });
    await rejects(
      wrong.chat.completions.create({ model: "flash", messages: [{ role: "user", content: "Hi" }] }),
      OpenAI.AuthenticationError,
      401,
    );
    const missing = await rejects(
      oai.responses.create({ model: "no-such-model", input: "Hi" }),
      OpenAI.NotFoundError,
      404,
    );
    check(missing.requestID, "the error's request id");
    const limited = new OpenAI({ apiKey: `${limitedKey}-openai`, baseURL: `${baseURL}/v1`, maxRetries: 0 });
    const said = [{ role: "user", content: "Hi" }];
    await limited.chat.completions.create({ model: "flash", messages: said });
    await rejects(
      limited.chat.completions.create({ model: "flash", messages: said }),
      OpenAI.RateLimitError,
      429,
    );
  },
  async openai_with_response_headers() {
    const { data, response, request_id } = await oai.chat.completions
      .create({ model: "sonnet", messages: [{ role: "user", content: "Hi" }] })
      .withResponse();
    check(data.choices[0].message.content === "You said: Hi", "the reply");
    check(request_id && response.headers.get("x-request-id") === request_id, "x-request-id");
  },

  // @anthropic-ai/sdk: Messages, answered by GPT-4o, Gemini and GPT-5 behind the gateway
  async anthropic_messages() {
    const said = [{ role: "user", content: "Hi" }];
    const whole = await claude.messages.create({ model: "gpt", max_tokens: 200, messages: said });
    check(whole.content[0].text === "You said: Hi" && whole.stop_reason === "end_turn", "reply");
    check(whole._request_id, "a request id");
    const stream = claude.messages.stream({ model: "flash", max_tokens: 200, messages: said });
    let text = "";
    stream.on("text", (delta) => {
      text += delta;
    });
    const final = await stream.finalMessage();
    check(text === "You said: Hi" && final.usage.output_tokens > 0, "streamed text and usage");
  },
  async anthropic_tools_two_turns() {
    const tool = { name: weather.name, description: weather.description, input_schema: weather.schema };
    const messages = [{ role: "user", content: "Weather in Oslo?" }];
    const stream = claude.messages.stream({ model: "gpt5", max_tokens: 300, messages, tools: [tool] });
    const first = await stream.finalMessage();
    const call = first.content.find((block) => block.type === "tool_use");
    check(first.stop_reason === "tool_use" && call.input.city === "Oslo", "a tool_use block");
    messages.push(
      { role: "assistant", content: first.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "2 C" }] },
    );
    const second = await claude.messages.create({
      model: "flash",
      max_tokens: 300,
      messages,
      tools: [tool],
    });
    check(second.content[0].text.includes("2 C"), "the tool's result used");
  },
  async anthropic_tool_runner() {
    // It asks for a server-held thread first, and sends the whole conversation on refusal.
    const ran = [];
    const tool = betaTool({
      name: weather.name,
      description: weather.description,
      inputSchema: weather.schema,
      run: async ({ city }) => {
        ran.push(city);
        return `Cold in ${city}`;
      },
    });
    for (const stream of [false, true]) {
      const runner = claude.beta.messages.toolRunner({
        model: "flash",
        max_tokens: 300,
        messages: [{ role: "user", content: "Weather in Oslo?" }],
        tools: [tool],
        stream,
      });
      const final = await runner.runUntilDone();
      check(final.content[0].text === "According to get_weather: Cold in Oslo.", "the answer");
    }
    check(ran.join() === "Oslo,Oslo", "the tool ran once a run");
  },
  async anthropic_errors() {
    const wrong = new Anthropic({ apiKey: "wrong", baseURL, maxRetries: 0 });
    const said = [{ role: "user", content: "Hi" }];
    await rejects(
      wrong.messages.create({ model: "gpt", max_tokens: 10, messages: said }),
      Anthropic.AuthenticationError,
      401,
    );
    const missing = await rejects(
      claude.messages.create({ model: "no-such-model", max_tokens: 10, messages: said }),
      Anthropic.NotFoundError,
      404,
    );
    check(missing.requestID, "the error's request id");
    const limited = new Anthropic({ apiKey: `${limitedKey}-anthropic`, baseURL, maxRetries: 0 });
    await limited.messages.create({ model: "gpt", max_tokens: 10, messages: said });
    await rejects(
      limited.messages.create({ model: "gpt", max_tokens: 10, messages: said }),
      Anthropic.RateLimitError,
      429,
    );
  },

  // The Vercel AI SDK: an agent loop with a tool through each provider package
  async ai_sdk_openai_chat() {
    await aiSdkAgent(createOpenAI({ baseURL: `${baseURL}/v1`, apiKey: key }).chat("sonnet"));
  },
  async ai_sdk_openai_responses() {
    await aiSdkAgent(createOpenAI({ baseURL: `${baseURL}/v1`, apiKey: key }).responses("flash"));
  },
  async ai_sdk_anthropic() {
    await aiSdkAgent(createAnthropic({ baseURL: `${baseURL}/v1`, apiKey: key })("gpt"));
  },
  async ai_sdk_errors() {
    const wrong = createOpenAI({ baseURL: `${baseURL}/v1`, apiKey: "wrong" });
    try {
      await ai.generateText({ model: wrong.chat("flash"), prompt: "Hi", maxRetries: 0 });
    } catch (error) {
      check(ai.APICallError.isInstance(error) && error.statusCode === 401, "APICallError 401");
      return;
    }
    throw new Error("expected an APICallError");
  },
};

async function aiSdkAgent(model) {
  const tools = {
    get_weather: ai.tool({
      description: weather.description,
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => `Cold in ${city}`,
    }),
  };
  const stopWhen = ai.stepCountIs(3);
  const prompt = "Weather in Oslo?";
  const whole = await ai.generateText({ model, tools, stopWhen, prompt, maxRetries: 0 });
  check(whole.steps.length === 2 && whole.steps[0].finishReason === "tool-calls", "two steps");
  const said = whole.steps[0].content.filter((part) => part.type === "text");
  check(said.length === 0, `no text part in the tool call's step, got ${JSON.stringify(said)}`);
  check(whole.text.includes("Cold in Oslo") && whole.finishReason === "stop", "the answer");
  check(whole.totalUsage.outputTokens > 0, "usage");
  const errors = [];
  const streamed = ai.streamText({
    model,
    tools,
    stopWhen,
    prompt,
    maxRetries: 0,
    onError: ({ error }) => errors.push(error),
  });
  let text = "";
  for await (const delta of streamed.textStream) text += delta;
  check(errors.length === 0, `no stream error, got ${errors[0]}`);
  check(text.includes("Cold in Oslo") && (await streamed.finishReason) === "stop", "streamed");
  check((await streamed.totalUsage).outputTokens > 0, "streamed usage");
  const { output } = await ai.generateText({
    model,
    output: ai.Output.object({ schema: City }),
    prompt: "A city?",
    maxRetries: 0,
  });
  check(typeof output.population === "number", "a structured City");
}

for (const [name, run] of Object.entries(checks)) {
  if (only.length && !only.includes(name)) continue;
  try {
    await run();
    console.log(JSON.stringify({ check: name, ok: true }));
  } catch (error) {
    console.log(JSON.stringify({ check: name, ok: false, error: String(error?.stack ?? error) }));
  }
}
